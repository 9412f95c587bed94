/**
 * `datagen-checkpoint-log/langgraph`: a LangGraph.js checkpoint saver on the log
 * (docs/langgraph.md). Needs the peer dependency `@langchain/langgraph-checkpoint`.
 */
import '../runtime.ts';

export { DgclCheckpointSaver, type DgclCheckpointSaverOptions } from './saver.ts';
