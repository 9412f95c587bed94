// A LangGraph.js graph persisted on the log: three nodes, `durability: 'sync'` (each step's
// checkpoint is acknowledged by the log before the next step starts). Kill it inside node 2, run
// it again in a new process: it resumes from the checkpoint after node 1, which does not run again.
//
//   npx tsx examples/langgraph-resume.ts --root ./data --thread t1 [--kill-in n2] [--calls FILE]
//
// `--calls FILE` appends one line per node call (synced), so a test can count calls across the
// kill (test/langgraph/resume.test.ts). The second run passes `null` as input: "continue".
import { appendFileSync, closeSync, fsyncSync, openSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { DgclCheckpointSaver } from '../lib/langgraph/index.ts';

const State = Annotation.Root({
  topic: Annotation<string>(),
  outline: Annotation<string>(),
  draft: Annotation<string>(),
  review: Annotation<string>(),
});

export function buildGraph(saver: DgclCheckpointSaver, onNode: (name: string) => void) {
  return new StateGraph(State)
    .addNode('n1', (s) => {
      onNode('n1');
      return { outline: `outline of ${s.topic}` };
    })
    .addNode('n2', (s) => {
      onNode('n2');
      return { draft: `draft from ${s.outline}` };
    })
    .addNode('n3', (s) => {
      onNode('n3');
      return { review: `${s.draft.length} characters reviewed` };
    })
    .addEdge(START, 'n1')
    .addEdge('n1', 'n2')
    .addEdge('n2', 'n3')
    .addEdge('n3', END)
    .compile({ checkpointer: saver });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      root: { type: 'string', default: './data' },
      thread: { type: 'string', default: 'thread-1' },
      'kill-in': { type: 'string' },
      calls: { type: 'string' },
    },
  });
  const saver = new DgclCheckpointSaver({ root: values.root, pipeline: 'langgraph-demo', experiment: 'exp-1' });
  const graph = buildGraph(saver, (name) => {
    if (values.calls) {
      const fd = openSync(values.calls, 'a');
      appendFileSync(fd, `${name}\n`);
      fsyncSync(fd);
      closeSync(fd);
    }
    if (values['kill-in'] === name) process.kill(process.pid, 'SIGKILL');
  });
  const config = { configurable: { thread_id: values.thread }, durability: 'sync' as const };
  try {
    // A thread with a checkpoint resumes (input null); a new one starts from the topic.
    const resuming = (await saver.getTuple({ configurable: { thread_id: values.thread } })) !== undefined;
    const out = await graph.invoke(resuming ? null : { topic: 'checkpoint logs' }, config);
    console.log(JSON.stringify({ resumed: resuming, state: out }));
  } finally {
    await saver.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
