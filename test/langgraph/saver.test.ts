// What the validation suite does not cover: thread ids that are not valid item ids, namespaces
// and channel names past the log's 256-character field-name limit, a deleted thread used again.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { openLog } from '../../lib/index.ts';
import { DgclCheckpointSaver } from '../../lib/langgraph/index.ts';

const newOpts = () => ({ root: `file://${mkdtempSync(path.join(tmpdir(), 'dgcl-lg-saver-'))}`, pipeline: 'lg', experiment: 'e' });

function checkpoint(values: Record<string, unknown>, version: number): Checkpoint {
  const c: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1) };
  c.channel_values = values;
  c.channel_versions = Object.fromEntries(Object.keys(values).map((k) => [k, version]));
  return c;
}

describe('DgclCheckpointSaver beyond the validation suite', () => {
  it('thread ids that are not item ids, long namespaces and channel names round-trip, and list finds the real thread id', async () => {
    const opts = newOpts();
    const saver = new DgclCheckpointSaver(opts);
    const longThread = 't'.repeat(600);
    const oddThread = 'line\nbreak';
    const ns = `outer:${'n'.repeat(300)}|inner:task`;
    const channel = `ch-${'c'.repeat(300)}`;
    for (const thread_id of [longThread, oddThread]) {
      const c = checkpoint({ [channel]: `value of ${thread_id.length}` }, 1);
      await saver.put({ configurable: { thread_id, checkpoint_ns: ns } }, c, { source: 'loop', step: 0, parents: {} }, { [channel]: 1 });
      await saver.putWrites({ configurable: { thread_id, checkpoint_ns: ns, checkpoint_id: c.id } }, [[channel, 'pending']], `task-${'x'.repeat(300)}`);
      const t = await saver.getTuple({ configurable: { thread_id, checkpoint_ns: ns } });
      expect(t?.checkpoint.id).toBe(c.id);
      expect(t?.checkpoint.channel_values).toEqual({ [channel]: `value of ${thread_id.length}` });
      expect(t?.pendingWrites).toEqual([[`task-${'x'.repeat(300)}`, channel, 'pending']]);
      expect(t?.config.configurable).toMatchObject({ thread_id, checkpoint_ns: ns });
    }
    const listed = [];
    for await (const t of saver.list({})) listed.push(t.config.configurable?.thread_id);
    expect(listed.sort()).toEqual([longThread, oddThread].sort());
    // Every field name the saver wrote fits the log's limit (the log would have refused it).
    const log = await openLog(opts);
    for (const item of (await log.items()).items) for (const name of Object.keys((await log.fold(item.itemId)).fields)) expect(name.length).toBeLessThanOrEqual(256);
    await log.close();
    await saver.close();
  });

  it('a deleted thread reads as absent at once and its id can be used again', async () => {
    const saver = new DgclCheckpointSaver(newOpts());
    const config = { configurable: { thread_id: 'th-1', checkpoint_ns: '' } };
    const old = checkpoint({ a: 'old' }, 1);
    await saver.put(config, old, { source: 'loop', step: 0, parents: {} }, { a: 1 });
    await saver.deleteThread('th-1');
    expect(await saver.getTuple(config)).toBeUndefined();
    const fresh = checkpoint({ a: 'new' }, 1);
    await saver.put(config, fresh, { source: 'input', step: -1, parents: {} }, { a: 1 });
    const t = await saver.getTuple(config);
    expect(t?.checkpoint.id).toBe(fresh.id);
    expect(t?.checkpoint.channel_values).toEqual({ a: 'new' });
    const ids = [];
    for await (const x of saver.list({ configurable: { thread_id: 'th-1' } })) ids.push(x.checkpoint.id);
    expect(ids).toEqual([fresh.id]);
    await saver.close();
  });

  it('the latest checkpoint of a namespace is found past many newer checkpoints of another namespace', async () => {
    const saver = new DgclCheckpointSaver(newOpts());
    const root = checkpoint({ a: 'root' }, 1);
    await saver.put({ configurable: { thread_id: 'th', checkpoint_ns: '' } }, root, { source: 'loop', step: 0, parents: {} }, { a: 1 });
    let last = '';
    for (let i = 0; i < 40; i++) {
      const c = checkpoint({ b: i }, i + 1);
      await saver.put({ configurable: { thread_id: 'th', checkpoint_ns: 'child:1' } }, c, { source: 'loop', step: i, parents: {} }, { b: i + 1 });
      last = c.id;
    }
    expect((await saver.getTuple({ configurable: { thread_id: 'th', checkpoint_ns: '' } }))?.checkpoint.id).toBe(root.id);
    expect((await saver.getTuple({ configurable: { thread_id: 'th', checkpoint_ns: 'child:1' } }))?.checkpoint.id).toBe(last);
    await saver.close();
  });
});
