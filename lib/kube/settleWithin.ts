/**
 * Runs `work` and gives up on it after `timeoutMs`, whether or not it heeds the signal it is
 * handed. Some credentials (ManagedIdentityCredential among them) ignore their abort signal: a
 * call to a hung identity endpoint would otherwise stay pending for as long as the process
 * lives, and everyone waiting on it with it.
 */
export function settleWithin<T>(timeoutMs: number, work: (signal: AbortSignal) => Promise<T>, onTimeout: () => Error): Promise<T> {
  const controller = new AbortController();
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      const error = onTimeout();
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    let started: Promise<T>;
    try {
      started = work(controller.signal);
    } catch (error) {
      clearTimeout(timer);
      reject(error);
      return;
    }
    started.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
