// Emitter (emitter.js): the events of the client and of its subscriptions, and their listeners.

export {}; // only the names marked `export` below are exported

/** An event listener: called with the event's value, `this` being the emitter. */
export type Listener<Target, Value> = (this: Target, value: Value) => void;

/**
 * The module's event emitter (not exported by it). A listener that throws is reported
 * (`reportError` in a browser, `console.error` elsewhere: it never ends a Node process) and the
 * other listeners and the stream go on.
 */
export declare class Emitter<Events> {
  protected constructor();
  /** Calls `listener(value)` on each event `event`; returns a function that removes it. */
  on<K extends keyof Events>(event: K, listener: Listener<this, Events[K]>): () => void;
  /** Calls `listener` on the next event `event` only; returns a function that removes it. */
  once<K extends keyof Events>(event: K, listener: Listener<this, Events[K]>): () => void;
  /** Removes a listener added with `on`. */
  off<K extends keyof Events>(event: K, listener: Listener<this, Events[K]>): void;
}
