// Emitter: the events of the client and of its subscriptions.

/**
 * A listener's exception, reported without ending anything: `reportError` in a browser (it shows
 * in the console as an uncaught error would, and the page goes on), `console.error` elsewhere. In
 * Node an uncaught error (a rethrow in a timer, or `reportError` where the runtime has one) would
 * end the process.
 */
function reportListenerError(error) {
  const page = typeof document !== 'undefined' || typeof WorkerGlobalScope !== 'undefined';
  if (page && typeof globalThis.reportError === 'function') globalThis.reportError(error);
  else if (typeof console !== 'undefined') console.error('receptionist-client: a listener threw:', error);
}

export class Emitter {
  #listeners = new Map();

  /** Calls `listener(value)` on every event `name`; returns a function that removes it. */
  on(name, listener) {
    if (typeof listener !== 'function') throw new TypeError('on: the listener must be a function');
    let set = this.#listeners.get(name);
    if (!set) this.#listeners.set(name, (set = new Set()));
    set.add(listener);
    return () => this.off(name, listener);
  }

  /** Calls `listener` on the next event `name` only. */
  once(name, listener) {
    const off = this.on(name, (value) => { off(); listener.call(this, value); });
    return off;
  }

  off(name, listener) {
    const set = this.#listeners.get(name);
    if (set) set.delete(listener);
  }

  /** Whether a listener waits for `name` (what would only be made for listeners is not made otherwise). */
  _listens(name) {
    const set = this.#listeners.get(name);
    return set !== undefined && set.size > 0;
  }

  /** Whether event `name` is no longer given out (a subscription's, once it is closed). */
  _silenced() { return false; }

  _emit(name, value) {
    const set = this.#listeners.get(name);
    if (!set || set.size === 0) return;
    for (const listener of [...set]) {
      if (this._silenced(name)) return; // an earlier listener ended it
      try {
        listener.call(this, value);
      } catch (error) {
        reportListenerError(error); // one failing listener must not break the stream's state
      }
    }
  }
}
