/**
 * Give up a writer slot when the process is told to stop: on SIGINT or SIGTERM, close the log
 * (the appends queued are served, the writer's shard is merged, its slot released), then let the
 * signal end the process as it would have (exit status 128 + n, as the shell expects). So the
 * next writer starts at once instead of waiting out the lease, and nothing stays unmerged.
 *
 * Opt-in for the library (`openLog({ closeOnSignals: true })`): a library that installs signal
 * handlers changes how the whole process stops. An application that handles the signals itself
 * keeps control: once the log is closed the signal is raised again only if no other handler is
 * left. A second signal while closing ends the process at once (the handler is gone by then).
 */
export const CLOSE_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/** Calls `close` on the first of `signals`, then re-raises it; returns a function that stops listening. */
export function closeOnSignals(close: () => Promise<void>, signals: readonly NodeJS.Signals[] = CLOSE_SIGNALS): () => void {
  const off = () => {
    for (const s of signals) process.removeListener(s, handler);
  };
  function handler(signal: NodeJS.Signals): void {
    off();
    void close()
      .catch(() => undefined) // closing is best effort here: the signal still ends the process
      .finally(() => {
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
  }
  for (const s of signals) process.on(s, handler);
  return off;
}
