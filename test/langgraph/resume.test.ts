// examples/langgraph-resume.ts: a 3-node graph SIGKILLed inside node 2 resumes in a new process
// from the log, and node 1 does not run again.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DgclCheckpointSaver } from '../../lib/langgraph/index.ts';
import { openLog } from '../../lib/index.ts';
import { startTs } from '../support/proc.ts';

describe('examples/langgraph-resume.ts', () => {
  it('killed in node 2, resumed in a new process: node 1 ran once, node 2 twice, node 3 once', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-lg-resume-'));
    const root = `file://${dir}/root`;
    const calls = path.join(dir, 'calls.txt');
    const args = ['--root', root, '--thread', 'thread-7', '--calls', calls];

    const killed = await startTs('examples/langgraph-resume.ts', [...args, '--kill-in', 'n2']).exit;
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    expect(readFileSync(calls, 'utf8').trim().split('\n')).toEqual(['n1', 'n2']);

    const p = startTs('examples/langgraph-resume.ts', args);
    const done = await p.exit;
    expect(done.code, done.stderr).toBe(0);
    expect(readFileSync(calls, 'utf8').trim().split('\n')).toEqual(['n1', 'n2', 'n2', 'n3']);
    const out = JSON.parse(p.lines.at(-1)!) as { resumed: boolean; state: Record<string, string> };
    expect(out.resumed).toBe(true);
    expect(out.state).toEqual({
      topic: 'checkpoint logs',
      outline: 'outline of checkpoint logs',
      draft: 'draft from outline of checkpoint logs',
      review: `${'draft from outline of checkpoint logs'.length} characters reviewed`,
    });

    // The thread is one item; each checkpoint one batch whose STEP_COMPLETED is the cursor.
    const log = await openLog({ root, pipeline: 'langgraph-demo', experiment: 'exp-1' });
    const state = await log.fold('thread-7');
    expect(state.status).toBe('in_progress');
    expect(state.cursor?.stepName).toBe('checkpoint');
    const saver = new DgclCheckpointSaver({ root, pipeline: 'langgraph-demo', experiment: 'exp-1' });
    const latest = await saver.getTuple({ configurable: { thread_id: 'thread-7' } });
    expect(latest?.checkpoint.channel_values).toMatchObject({ review: out.state.review });
    expect(state.cursor?.stepInstanceId).toBe(`c//${latest!.checkpoint.id}`);
    await saver.close();
    await log.close();
  });
});
