/** A LangGraph thread in the report: named as a thread, its cursor a checkpoint, its fields labelled. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { DgclCheckpointSaver } from '../lib/langgraph/index.ts';
import { report } from '../lib/report/report.ts';

describe('report of LangGraph threads', () => {
  it('lists each thread by name with its latest checkpoint, and labels the checkpoint, channel and write fields', async () => {
    const o = { root: mkdtempSync(path.join(tmpdir(), 'dgcl-report-lg-')), pipeline: 'lg', experiment: 'e' };
    const saver = new DgclCheckpointSaver(o);
    const ids: string[] = [];
    for (const thread_id of ['thread-7', '#not an item id']) {
      const c: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { topic: 'x' }, channel_versions: { topic: 1 } };
      await saver.put({ configurable: { thread_id, checkpoint_ns: '' } }, c, { source: 'loop', step: 0, parents: {} }, { topic: 1 });
      await saver.putWrites({ configurable: { thread_id, checkpoint_ns: '', checkpoint_id: c.id } }, [['topic', 'y']], 'task-1');
      ids.push(c.id);
    }
    await saver.close();
    // A plain item beside them keeps its plain row.
    const log = await openLog(o);
    await log.append([{ itemId: 'doc-1', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { 'c//x': 1 } }]);
    const r = await report(log);
    await log.close();

    const rows = new Map(r.data.items.map((i) => [i.id, i]));
    expect(rows.get('thread-7')).toMatchObject({ name: 'LangGraph thread', cursor: `LangGraph checkpoint ${ids[0]}` });
    const hashed = r.data.items.find((i) => i.id.startsWith('#'))!;
    expect(hashed).toMatchObject({ name: 'LangGraph thread "#not an item id"', cursor: `LangGraph checkpoint ${ids[1]}` });
    expect(rows.get('doc-1')).toMatchObject({ name: null, cursor: '0:load (attempt 1)' });

    const labels = r.data.trajectories['thread-7']!.filter((e) => e.field !== null).map((e) => e.label);
    expect(labels).toEqual([`checkpoint ${ids[0]}`, 'channel topic @ 1', `pending write task-1/0 of checkpoint ${ids[0]}`]);
    // A field of another item that merely looks like the saver's keeps its name.
    expect(r.data.trajectories['doc-1']!.find((e) => e.field === 'c//x')!.label).toBeNull();
  });
});
