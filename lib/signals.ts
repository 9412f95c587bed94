/**
 * Give up a writer slot when the process is told to stop: on SIGINT or SIGTERM, close the log
 * (the appends queued are served, the writer's shard is merged, its slot released), then let the
 * signal end the process as it would have (exit status 128 + n, as the shell expects). So the
 * next writer starts at once instead of waiting out the lease, and nothing stays unmerged.
 *
 * Opt-in for the library (`openLog({ closeOnSignals: true })`): a library that installs signal
 * handlers changes how the whole process stops. An application that handles the signals itself
 * keeps control: once the log is closed the signal is raised again only if no other handler is
 * left. While closing, a second SIGINT (Ctrl-C again) ends the process at once; a repeated
 * SIGTERM or SIGHUP is ignored (a supervisor, or a signal sent to a whole process group, repeats
 * itself; SIGKILL is its escalation).
 */
export const CLOSE_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/** Calls `close` on the first of `signals`, then re-raises it; returns a function that stops listening. */
export function closeOnSignals(close: () => Promise<void>, signals: readonly NodeJS.Signals[] = CLOSE_SIGNALS): () => void {
  const off = () => {
    for (const s of signals) process.removeListener(s, handler);
  };
  let closing = false;
  function handler(signal: NodeJS.Signals): void {
    if (closing) {
      if (signal !== 'SIGINT') return;
      off();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      return;
    }
    closing = true;
    void close()
      .catch(() => undefined) // closing is best effort here: the signal still ends the process
      .finally(() => {
        off();
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
  }
  for (const s of signals) process.on(s, handler);
  return off;
}
