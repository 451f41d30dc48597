// SSE heartbeat: how a subscription's event stream notices a gateway that stopped answering.

/** A clock that only moves forward: setting the wall clock neither fakes a silence nor hides one. */
const now = typeof performance !== 'undefined' && typeof performance.now === 'function'
  ? () => performance.now() : () => Date.now();

/** A timer's longest delay. */
const LONGEST_MS = 2147483647;

/**
 * `EventSource` hides the gateway's `: heartbeat` comments, so a gateway that stops answering
 * while the stream's connection stays open (a frozen process, a dead network path) would leave a
 * subscription `'live'` for good. With `heartbeatMs` above 0 the stream is asked with
 * `?heartbeat=event`: the gateway then sends a `heartbeat` event naming its interval
 * (`{"type":"heartbeat","intervalMs":15000}`) as the stream opens and after every interval with
 * nothing else to send. One of these watches one open stream: every event it receives, heartbeat
 * or not, notes the time it came, and once nothing at all has come for the gateway's interval
 * (`heartbeatMs` until the first heartbeat names it) and `heartbeatTimeoutMs` more, `onSilent` is
 * called with that many milliseconds. An event only notes its time: one timer runs, and looks at
 * that time when it fires.
 */
export class SseHeartbeat {
  constructor(heartbeatMs, heartbeatTimeoutMs, onSilent) {
    this._intervalMs = heartbeatMs;
    this._timeoutMs = heartbeatTimeoutMs;
    this._onSilent = onSilent;
    this._heardAt = now();
    this._timer = null;
    this._arm(this._limitMs());
  }

  /** An event came, any event: the gateway is answering. */
  heard() { this._heardAt = now(); }

  /**
   * A `heartbeat` event (its data, a JSON string): heard, and its interval is the one to expect
   * from now on. A new interval looks again at once, as a longer wait may be under way.
   */
  heartbeat(data) {
    this.heard();
    let intervalMs = null;
    try { intervalMs = JSON.parse(data).intervalMs; } catch { /* not JSON: heard all the same */ }
    if (typeof intervalMs !== 'number' || !Number.isFinite(intervalMs) || intervalMs <= 0) return;
    if (intervalMs === this._intervalMs || this._timer === null) return;
    this._intervalMs = intervalMs;
    this.stop();
    this._arm(this._limitMs());
  }

  /** The stream is closed, lost or replaced: no timer outlives it. */
  stop() {
    if (this._timer !== null) clearTimeout(this._timer);
    this._timer = null;
  }

  _limitMs() { return this._intervalMs + this._timeoutMs; }

  _arm(ms) {
    this._timer = setTimeout(() => this._check(), Math.min(Math.max(ms, 1), LONGEST_MS));
  }

  _check() {
    this._timer = null;
    const limitMs = this._limitMs();
    const leftMs = this._heardAt + limitMs - now();
    if (leftMs > 0) this._arm(leftMs);
    else this._onSilent(Math.round(limitMs));
  }
}
