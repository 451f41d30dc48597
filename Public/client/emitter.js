// Emitter: the events of the client and of its subscriptions.

function reportListenerError(error) {
  if (typeof globalThis.reportError === 'function') globalThis.reportError(error);
  else setTimeout(() => { throw error; });
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

  _emit(name, value) {
    const set = this.#listeners.get(name);
    if (!set || set.size === 0) return;
    for (const listener of [...set]) {
      try {
        listener.call(this, value);
      } catch (error) {
        reportListenerError(error); // one failing listener must not break the stream's state
      }
    }
  }
}
