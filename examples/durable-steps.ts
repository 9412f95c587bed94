// Durable steps: a three-step pipeline over a few documents that can be killed anywhere and
// rerun; completed steps are replayed from the log, never run again.
//
//   npx tsx examples/durable-steps.ts --root ./data [--docs 4] [--kill-at doc-2:generate] [--calls FILE]
//
// `--kill-at ITEM:STEP` SIGKILLs this process inside that step's function (a real crash, no
// cleanup). `--calls FILE` appends one line `ITEM STEP attempt` per step-function call, synced
// before the function does anything, so a test can count calls across a kill
// (test/conformance/steps.ts).
import { appendFileSync, closeSync, fsyncSync, openSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { openLog, type OpenLogOptions, type StepContext } from '../lib/index.ts';

export interface PipelineOptions {
  log: Omit<OpenLogOptions, 'pipeline' | 'experiment'> & { pipeline?: string; experiment?: string };
  runId: string;
  docs: number;
  /** Called first thing in every step function. */
  onCall?: (ctx: StepContext) => void;
}

export async function runPipeline(o: PipelineOptions): Promise<void> {
  const log = await openLog({ pipeline: 'durable-demo', experiment: 'exp-1', ...o.log });
  try {
    for (let d = 0; d < o.docs; d++) {
      const item = await log.item(`doc-${d}`, { runId: o.runId });
      const loaded = await item.step('load', 0, (ctx) => {
        o.onCall?.(ctx);
        return { set: { text: `document number ${d}` } };
      });
      const text = loaded.set.text as string;
      const generated = await item.step('generate', 1, (ctx) => {
        o.onCall?.(ctx);
        // Stands in for an LLM call: the expensive, non-deterministic part worth not repeating.
        const answer = `${text.length} characters`;
        return { set: { answer }, append: { messages: [{ role: 'assistant', content: answer }] } };
      });
      await item.step('score', 2, (ctx) => {
        o.onCall?.(ctx);
        return { set: { score: (generated.set.answer as string).length / 100 } };
      });
      await item.terminal('completed');
    }
  } finally {
    await log.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      root: { type: 'string', default: './data' },
      docs: { type: 'string', default: '4' },
      'kill-at': { type: 'string' },
      calls: { type: 'string' },
      run: { type: 'string', default: `run-${process.pid}` },
    },
  });
  const killAt = values['kill-at'];
  await runPipeline({
    log: { root: values.root },
    runId: values.run,
    docs: Number(values.docs),
    onCall: (ctx) => {
      if (values.calls) {
        const fd = openSync(values.calls, 'a');
        appendFileSync(fd, `${ctx.itemId} ${ctx.stepName} ${ctx.attempt}\n`);
        fsyncSync(fd);
        closeSync(fd);
      }
      if (killAt === `${ctx.itemId}:${ctx.stepName}`) process.kill(process.pid, 'SIGKILL');
    },
  });
  console.log('pipeline finished');
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
