// Connection: the WebSocket half of ReceptionistClient (connecting, routing, reconnecting, tokens).

import { DEFAULTS, MAX_TIMER_MS, PROTOCOL } from './defaults.js';
import { Heartbeat } from './heartbeat.js';
import { answersHttp, browserOffline, isObject, utf8Length } from './helpers.js';

/**
 * ReceptionistClient's base class: its WebSocket, and what both transports share (backoff,
 * status, tokens, the browser going offline and online). It works on the state that
 * ReceptionistClient's constructor sets up, and calls back its `_settleCommit`, `_sendCall`,
 * `_failCommits` and `_sendSubscribe`; it is not used on its own.
 */
export class Connection extends Heartbeat {
  // -- The WebSocket --

  /** Whether the client needs its WebSocket: for a subscription, or for a call waiting to be sent. */
  _wanted() { return this._subs.size > 0 || this._commits.size > 0; }

  /** Connects unless a connection is open, under way or due, or the browser is offline. */
  _connectIfIdle() {
    if (this._socket === null && this._retryTimer === null && this._status !== 'offline' && this._status !== 'connecting') this._connect();
  }

  _connect() {
    this._cancelRetry();
    if (this._closed || this._transport !== 'websocket') return;
    if (!this._wanted()) { this._setStatus('idle'); return; } // nothing needs it
    if (browserOffline()) {
      this._setStatus('offline');
      return;
    }
    const generation = ++this._generation;
    this._open = false;
    this._setStatus('connecting');
    this._connectTimer = setTimeout(() => this._connectTimedOut(generation), this._connectTimeoutMs);
    this._withToken((token) => {
      if (generation !== this._generation || this._closed) return;
      let url = `${this._base.ws}/ws`;
      if (token && this._tokenIn === 'query') url += `?token=${encodeURIComponent(token)}`;
      let socket;
      let opened = false;
      try {
        socket = new this._WebSocket(url, PROTOCOL);
      } catch (error) {
        queueMicrotask(() => this._lost(generation, false, { code: 0 }));
        return;
      }
      this._socket = socket;
      socket.onopen = () => {
        if (generation !== this._generation) return;
        this._cancelConnectTimer();
        opened = true;
        this._wsEverOpened = true;
        this._open = true;
        this._pending = [];
        this._routes = new Map();
        this._startHeartbeat(generation); // before any event, whose listener may close the client
        if (token && this._tokenIn === 'message') this._send({ type: 'auth', token }, { kind: 'auth' });
        this._setStatus('open');
        for (const sub of this._subs) if (sub.status !== 'failed') this._sendSubscribe(sub);
        for (const [key, call] of this._commits) if (!call.sent) this._sendCall(key, call);
      };
      socket.onmessage = (event) => {
        if (generation !== this._generation) return;
        this._heard();
        if (typeof event.data !== 'string') return;
        let frame;
        try { frame = JSON.parse(event.data); } catch { return; }
        if (isObject(frame)) this._onMessage(frame, utf8Length(event.data));
      };
      socket.onclose = (event) => {
        if (generation === this._generation) this._lost(generation, opened, event);
      };
    });
  }

  /**
   * The attempt took longer than `connectTimeoutMs` (a gateway that takes the connection and never
   * answers the upgrade, a token that never comes): it has failed, and the backoff goes on.
   */
  _connectTimedOut(generation) {
    this._connectTimer = null;
    if (generation !== this._generation || this._open) return;
    const socket = this._socket;
    this._lost(generation, false, { code: 0, reason: `no connection within ${this._connectTimeoutMs} ms` });
    this._generation += 1; // what the attempt still has under way (its token) is ignored
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = null;
      try { socket.close(); } catch { /* not open yet */ }
    }
  }

  _cancelConnectTimer() { clearTimeout(this._connectTimer); this._connectTimer = null; }

  _send(message, pending) {
    if (!this._socket || !this._open) return;
    if (pending) this._pending.push(pending);
    this._socket.send(JSON.stringify(message));
  }

  _onMessage(frame, bytes) {
    const type = frame.type;
    const head = this._pending[0];
    // A `pong` answers the heartbeat, and `unknown_type` a ping to a gateway from before `ping` (the
    // only message this client sends that a gateway may not know): neither answers `_pending`; any answer ends the backoff.
    if (type === 'pong' || (type === 'error' && frame.code === 'unknown_type')) { this._failures = 0; return; }
    if (type === 'draining') {
      this._drainDelayMs = this._drainDelay(frame);
      this._emit('draining', { reconnectAfterMs: this._drainDelayMs });
      return;
    }
    if (type === 'authenticated') {
      if (head && head.kind === 'auth') this._pending.shift();
      this._scheduleRenewal(frame.expiresAt);
      this._emit('authenticated', { expiresAt: frame.expiresAt });
      return;
    }
    if (['committed', 'error', 'rpc_result', 'rpc_error'].includes(type) && this._settleCommit(frame)) { this._failures = 0; return; }
    if (type === 'error') {
      // An error with a `ref` or an `id` answers a commit or an RPC (one no longer waiting),
      // never what `_pending` holds: only the answers to those carry neither.
      if (typeof frame.ref === 'string' || typeof frame.id === 'string') {
        this._emit('error', { code: String(frame.code || 'error'), message: String(frame.message || frame.code || 'error') });
      } else {
        this._onError(frame);
      }
      return;
    }
    const target = typeof frame.store === 'string' ? `store:${frame.store}`
      : typeof frame.topic === 'string' ? `topic:${frame.topic}` : null;
    if (target === null) return;
    const route = this._routes.get(target);
    if (type === 'unsubscribed') {
      // The answer to this client's unsubscribe names no reason; one with a reason is the
      // gateway's own (the store was deleted), whatever this client has asked meanwhile.
      if (head && head.kind === 'unsubscribe' && head.key === target && frame.reason === undefined) {
        this._pending.shift();
        this._dropLease(head.lease);
        return;
      }
      // Unasked: the gateway ended the subscription (its store was deleted, or a new token no
      // longer covers it), and the copy is stale. It is refused as a subscribe to a missing store
      // (or outside the token) is, and retried with backoff, so a store made again comes back as
      // a reset snapshot, as over SSE.
      const ended = route && route[0];
      if (ended && !ended.dead) {
        this._dropLease(ended);
        const sub = ended.sub;
        sub._lease = null;
        const code = frame.reason === 'forbidden' ? 'forbidden' : 'no_such_store';
        const error = { code, message: `the gateway ended the subscription (${frame.reason || 'unsubscribed'})` };
        this._emit('error', { ...error, subscription: sub });
        sub._refused(error);
      }
      return;
    }
    const lease = route && route[0];
    if ((type === 'snapshot' || type === 'subscribed') && head && head.kind === 'subscribe' && head.lease === lease) {
      this._pending.shift(); // the answer to that subscribe; a snapshot may also come unasked (a reset)
      if (!lease.dead) this._failures = 0;
    }
    if (lease && !lease.dead) lease.sub._onFrame(frame, bytes);
  }

  _onError(frame) {
    const error = { code: String(frame.code || 'error'), message: String(frame.message || frame.code || 'error') };
    const head = this._pending[0];
    // A token that runs out while connected is announced unasked, and the connection then closes.
    if (!head || (error.code === 'token_expired' && head.kind !== 'auth')) {
      this._emit('error', error);
      return;
    }
    this._pending.shift();
    if (head.kind === 'auth') {
      this._emit('error', error);
    } else if (head.kind === 'subscribe') {
      this._dropLease(head.lease);
      const sub = head.lease.sub;
      if (head.lease.dead) return;
      sub._lease = null;
      this._emit('error', { ...error, subscription: sub });
      if (error.code === 'already_subscribed') this._restart(); // the two sides disagree: start over
      else sub._refused(error);
    } else if (head.kind === 'unsubscribe') {
      if (error.code === 'not_subscribed') this._dropLease(head.lease);
      else this._restart(); // still subscribed on the gateway: start over rather than guess
    }
  }

  _dropLease(lease) {
    const route = this._routes.get(lease.sub._key);
    if (!route) return;
    const index = route.indexOf(lease);
    if (index >= 0) route.splice(index, 1);
    if (route.length === 0) this._routes.delete(lease.sub._key);
  }

  _drainDelay(frame) {
    const ms = Number(frame.reconnectAfterMs);
    return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), DEFAULTS.maxDrainDelayMs) : 0;
  }

  /**
   * A token given as a function is asked again ahead of `expiresAt` (seconds since the epoch) and
   * presented on the open connection (an `auth` message replaces the token), so a connection
   * outlives its tokens without reconnecting: at a quarter of the time left, at most a minute,
   * before it runs out.
   */
  _scheduleRenewal(expiresAt) {
    this._cancelRenewal();
    if (typeof this._token !== 'function' || typeof expiresAt !== 'number' || this._tokenIn !== 'message') return;
    const leftMs = expiresAt * 1000 - Date.now();
    const generation = this._generation;
    let dueInMs = Math.max(0, leftMs - Math.min(60_000, leftMs / 4));
    // A token that looks due already (a client clock ahead of the gateway's) is not asked for
    // again at once, which would loop: after a second, doubled while that lasts, up to 30 s.
    const hasty = dueInMs < DEFAULTS.minRenewalMs;
    if (hasty) dueInMs = Math.min(DEFAULTS.maxRenewalDelayMs, DEFAULTS.minRenewalMs * 2 ** Math.min(this._hastyRenewals, 16));
    this._hastyRenewals = hasty ? this._hastyRenewals + 1 : 0;
    // A timer runs at most 2^31 - 1 ms ahead (a longer one fires at once): a token of more than
    // about 24 days is looked at again then, not renewed.
    if (dueInMs > MAX_TIMER_MS) {
      this._renewTimer = setTimeout(() => {
        this._renewTimer = null;
        if (generation === this._generation) this._scheduleRenewal(expiresAt);
      }, MAX_TIMER_MS);
      return;
    }
    this._renewTimer = setTimeout(() => {
      this._renewTimer = null;
      this._withToken((token) => {
        if (generation !== this._generation || !this._open || !token) return;
        this._send({ type: 'auth', token }, { kind: 'auth' });
      });
    }, dueInMs);
  }

  _cancelRenewal() { clearTimeout(this._renewTimer); this._renewTimer = null; }

  _lost(generation, opened, event) {
    if (generation !== this._generation) return;
    this._cancelRenewal();
    this._cancelConnectTimer();
    this._stopHeartbeat();
    this._socket = null;
    this._open = false;
    this._pending = [];
    this._routes = new Map();
    this._failCommits();
    for (const sub of this._subs) { sub._lease = null; sub._cancelRetry(); }
    const code = event && typeof event.code === 'number' ? event.code : 0;
    this._emit('close', { code, reason: event && event.reason ? String(event.reason) : '' });
    if (this._closed) return;
    if (this._requested === 'auto' && !opened && !this._wsEverOpened) this._probeForFallback();
    let delay;
    if (this._drainDelayMs !== null) {
      delay = this._drainDelayMs; // the gateway spread its clients; it did not fail
      this._drainDelayMs = null;
    } else if (code === 1001) {
      delay = Math.random() * 1000;
    } else {
      delay = this._backoff(this._failures);
      this._failures += 1;
    }
    this._scheduleConnect(delay, code);
  }

  /**
   * Transport 'auto': a WebSocket that failed before ever opening counts towards the move to SSE
   * only if the gateway answers plain HTTP (below 500) meanwhile: the upgrade was refused on the
   * way (a proxy). An address that answers nothing is down, or the network is: WebSocket is tried
   * again, never given up for it.
   */
  _probeForFallback() {
    if (typeof this._EventSource !== 'function') return;
    answersHttp(`${this._base.http}/ws`, this._connectTimeoutMs).then((answered) => {
      // false: nothing answered. null: no fetch to ask with, so the failure counts as before.
      if (answered === false || this._closed || this._wsEverOpened || this._open || this._transport !== 'websocket') return;
      this._wsFailuresBeforeOpen += 1;
      if (this._wsFailuresBeforeOpen >= this._fallbackAfter) this._fallBackToSse();
    });
  }

  _fallBackToSse() {
    this._cancelRetry();
    this._dropSocket('the client moved to SSE, and calls need the WebSocket');
    this._transport = 'sse';
    this._setStatus('idle');
    this._emit('transport', { transport: 'sse' });
    for (const sub of this._subs) sub._startSse();
  }

  _scheduleConnect(delay, code = 0) {
    this._cancelRetry();
    if (browserOffline()) {
      this._setStatus('offline');
      return; // the 'online' event reconnects
    }
    this._retryAt = Date.now() + delay;
    this._retryTimer = setTimeout(() => { this._retryTimer = null; this._connect(); }, delay);
    this._setStatus('reconnecting', code);
  }

  /** Drops the socket and reconnects after a backoff step, resuming every subscription. */
  _restart() {
    this._dropSocket();
    for (const sub of this._subs) sub._lease = null;
    const delay = this._backoff(this._failures);
    this._failures += 1;
    this._scheduleConnect(delay);
  }

  /** Ends the socket; the calls it carried are failed, and with `unsent` (why) the others too. */
  _dropSocket(unsent = null) {
    this._cancelRenewal();
    this._cancelConnectTimer();
    this._stopHeartbeat();
    this._generation += 1;
    const socket = this._socket;
    this._socket = null;
    this._open = false;
    this._pending = [];
    this._routes = new Map();
    this._failCommits(unsent);
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = null;
      try { socket.close(1000); } catch { /* already closing */ }
    }
  }

  _cancelRetry() {
    if (this._retryTimer !== null) clearTimeout(this._retryTimer);
    this._retryTimer = null;
    this._retryAt = null;
  }

  /** Equal jitter: a delay drawn from [half, full] of the step, which doubles up to the cap. */
  _backoff(failures) {
    const step = Math.min(this._backoffMaxMs, this._backoffBaseMs * 2 ** Math.min(failures, 16));
    return step / 2 + Math.random() * (step / 2);
  }

  _setStatus(status, code = 0) {
    const retryAt = status === 'reconnecting' ? this._retryAt : null;
    if (status === this._status && retryAt === null) return;
    this._status = status;
    if (this._transport === 'websocket') for (const sub of this._subs) this._mirrorStatus(sub);
    this._emit('status', { status, retryAt, code });
  }

  /** Over WebSocket a subscription's status follows the socket's until the gateway answers it. */
  _mirrorStatus(sub) {
    switch (this._status) {
      case 'connecting': if (sub.status !== 'failed') sub._setStatus('connecting'); break;
      case 'reconnecting': if (sub.status !== 'failed') sub._setStatus('reconnecting', { retryAt: this._retryAt }); break;
      case 'offline': if (sub.status !== 'failed') sub._setStatus('offline'); break;
      default: break;
    }
  }

  _withToken(then) {
    const token = this._token;
    if (typeof token !== 'function') {
      then(token || null);
      return;
    }
    let value;
    try { value = token(); } catch (error) { value = Promise.reject(error); }
    Promise.resolve(value).then((resolved) => then(resolved || null), (error) => {
      this._emit('error', { code: 'token_unavailable', message: String(error && error.message ? error.message : error) });
      then(null);
    });
  }

  _online() {
    if (this._closed) return;
    if (this._transport === 'websocket') {
      if (this._socket === null) { this._failures = 0; this._connect(); }
      return;
    }
    for (const sub of this._subs) if (sub.status === 'offline' || sub.status === 'reconnecting') { sub._failures = 0; sub._startSse(); }
  }

  /** The browser went offline: what is not connected stops trying until it is back online. */
  _offline() {
    if (this._closed) return;
    if (this._transport === 'websocket') {
      if (!this._open) {
        this._cancelRetry();
        this._dropSocket();
        this._setStatus('offline');
      }
      return;
    }
    for (const sub of this._subs) {
      if (sub.status !== 'live' && sub.status !== 'failed') { sub._cancelRetry(); sub._stopSse(); sub._setStatus('offline'); }
    }
  }
}
