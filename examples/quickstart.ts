// The README's TypeScript snippet, kept compiling by CI (`tsc --noEmit` covers examples/).
import { openLog } from '../lib/index.ts';

export async function quickstart(pngBase64: string): Promise<void> {
  const log = await openLog({ root: './data', pipeline: 'qa-gen', experiment: 'exp-7' });
  const [ack] = await log.append([
    {
      itemId: 'doc-17',
      runId: 'run-42',
      create: {},
      step: { name: 'generate', index: 2 },
      attempt: 1,
      set: { answer: '42', score: 0.8, image: { $blob: pngBase64 } },
      append: { messages: [{ role: 'assistant', content: 'hi' }] },
    },
  ]);
  const state = await log.fold('doc-17');
  const bytes = await log.blob('doc-17', 'image');
  console.log(ack, state.status, bytes.length);
  await log.close();
}
