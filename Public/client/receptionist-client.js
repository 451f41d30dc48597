// ReceptionistClient: a connection to one gateway, its subscriptions, publish, commit and rpc.

import { Connection } from './connection.js';
import { DEFAULTS } from './defaults.js';
import { TOKEN_ERRORS } from './errors.js';
import { encodeMessage, isObject, utf8Length } from './helpers.js';
import { LIMITS } from './limits.js';
import { STORE_OPTION_KEYS, checkClientTimings, resolveBase, validateChanges, validateStoreOptions } from './options.js';
import { StoreSubscription } from './store-subscription.js';
import { TopicSubscription } from './topic-subscription.js';

const unavailable = (message) => Object.assign(new Error(message), { code: 'unavailable' });
/** A commit's or an RPC's promise, rejected at once with `code`. */
const failed = (label, code, message) => Promise.reject(Object.assign(new Error(`${label}: ${message}`), { code }));

/**
 * A connection to one gateway.
 *
 * Options: url (default: the page's origin), token (a string, or a function returning one or a
 * promise of one, asked before every connection), tokenIn ('message': an `auth` message, the
 * default; 'query': `/ws?token=`), transport ('auto', 'websocket' or 'sse'), backoffBaseMs,
 * backoffMaxMs, fallbackAfter, connectTimeoutMs, requestTimeoutMs, heartbeatMs (0: no heartbeat),
 * heartbeatTimeoutMs (client/defaults.js).
 *
 * Events: 'status' {status, retryAt, code} for the WebSocket ('connecting', 'open',
 * 'reconnecting', 'offline', 'closed'), 'close' {code, reason} when a WebSocket ends,
 * 'transport' {transport}, 'draining' {reconnectAfterMs}, 'authenticated' {expiresAt}, 'error'
 * {code, message, subscription?}.
 */
export class ReceptionistClient extends Connection {
  constructor(options = {}) {
    super();
    const {
      url, token, tokenIn = 'message', transport = 'auto',
      backoffBaseMs = DEFAULTS.backoffBaseMs, backoffMaxMs = DEFAULTS.backoffMaxMs,
      fallbackAfter = DEFAULTS.fallbackAfter, connectTimeoutMs = DEFAULTS.connectTimeoutMs,
      requestTimeoutMs = DEFAULTS.requestTimeoutMs, heartbeatMs = DEFAULTS.heartbeatMs,
      heartbeatTimeoutMs = DEFAULTS.heartbeatTimeoutMs,
    } = options;
    if (!['auto', 'websocket', 'sse'].includes(transport)) throw new TypeError(`ReceptionistClient: unknown transport ${transport}`);
    if (!['message', 'query'].includes(tokenIn)) throw new TypeError(`ReceptionistClient: unknown tokenIn ${tokenIn}`);
    checkClientTimings({ backoffBaseMs, backoffMaxMs, fallbackAfter, connectTimeoutMs, requestTimeoutMs, heartbeatMs, heartbeatTimeoutMs });
    this._base = resolveBase(url);
    this._token = token;
    this._tokenIn = tokenIn;
    this._backoffBaseMs = backoffBaseMs;
    this._backoffMaxMs = backoffMaxMs;
    this._fallbackAfter = fallbackAfter;
    this._connectTimeoutMs = connectTimeoutMs;
    this._requestTimeoutMs = requestTimeoutMs;
    this._heartbeatMs = heartbeatMs;
    this._heartbeatTimeoutMs = heartbeatTimeoutMs;
    this._WebSocket = options.WebSocket || globalThis.WebSocket;
    this._EventSource = options.EventSource || globalThis.EventSource;
    const hasWebSocket = typeof this._WebSocket === 'function';
    const hasEventSource = typeof this._EventSource === 'function';
    if (transport === 'websocket' && !hasWebSocket) throw new TypeError('ReceptionistClient: WebSocket is not available');
    if (transport === 'sse' && !hasEventSource) throw new TypeError('ReceptionistClient: EventSource is not available');
    this._requested = transport;
    this._transport = transport === 'sse' || (transport === 'auto' && !hasWebSocket) ? 'sse' : 'websocket';
    this._subs = new Set();
    this._closed = false;
    // The WebSocket: every socket gets a generation, and events of an older one are ignored.
    this._socket = null;
    this._generation = 0;
    this._open = false;
    this._pending = []; // what the gateway owes an answer to, in the order sent
    this._commits = new Map(); // ref → the commit or RPC waiting to be sent or answered (answers come in any order)
    this._commitCount = 0;
    this._routes = new Map(); // key → leases, oldest first: frames go to the first
    this._failures = 0;
    this._wsEverOpened = false;
    this._wsFailuresBeforeOpen = 0;
    this._retryTimer = null;
    this._retryAt = null;
    this._renewTimer = null;
    this._hastyRenewals = 0; // renewals in a row of a token that looked due already
    this._connectTimer = null;
    this._heartbeatTimer = null; // one at a time, while the WebSocket is open (client/heartbeat.js)
    this._heardAt = 0; // when the open WebSocket last received a frame (performance.now())
    this._pingedAt = null; // when the heartbeat's ping went, while it waits for a frame after it
    this._drainDelayMs = null;
    this._status = 'idle';
    this._onOnline = () => this._online();
    this._onOffline = () => this._offline();
    if (typeof window !== 'undefined' && window.addEventListener) {
      window.addEventListener('online', this._onOnline);
      window.addEventListener('offline', this._onOffline);
    }
  }

  /** 'websocket' or 'sse': the transport in use (transport 'auto' may move to 'sse'). */
  get transport() { return this._transport; }

  /** The WebSocket's state: 'idle', 'connecting', 'open', 'reconnecting', 'offline' or 'closed'. */
  get status() { return this._status; }

  /** The subscriptions that are not closed. */
  get subscriptions() { return [...this._subs]; }

  /**
   * Follows a store: a snapshot, then every change set (or, with options, the part of it they
   * select, at most `maxRate` frames a second). Options: {models, paths, maxRate, old}.
   */
  subscribeStore(name, options = {}) {
    if (typeof name !== 'string' || name === '') throw new TypeError('subscribeStore: the store name must be a non-empty string');
    return this._add(new StoreSubscription(this, name, validateStoreOptions(options)));
  }

  /**
   * Publishes `data` (any JSON value) to `topic` over HTTP, with the client's token as
   * `Authorization: Bearer` when it has one (its `publish` claim must name the topic). Resolves
   * with the message's sequence number; rejects with an Error carrying the gateway's `code`
   * (`forbidden`, `too_many_requests`, …) and `status`, or `unavailable` and status 0 with no
   * answer within `requestTimeoutMs`. `idempotencyKey` makes a retry safe.
   */
  async publish(topic, data, { idempotencyKey } = {}) {
    if (typeof topic !== 'string' || topic === '') throw new TypeError('publish: the topic name must be a non-empty string');
    const body = JSON.stringify(data);
    if (body === undefined) throw new TypeError('publish: `data` must be a JSON value');
    const ms = this._requestTimeoutMs;
    const abort = typeof AbortController === 'function' ? new AbortController() : null;
    let timer;
    const late = new Promise((resolve, reject) => {
      timer = setTimeout(() => {
        if (abort) abort.abort();
        reject(Object.assign(new Error(`publish to ${topic}: no answer within ${ms} ms; whether it was published is unknown`),
          { code: 'unavailable', status: 0 }));
      }, ms);
    });
    try {
      return await Promise.race([this._post(topic, body, idempotencyKey, abort), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async _post(topic, body, idempotencyKey, abort) {
    const headers = { 'Content-Type': 'application/json' };
    const token = await new Promise((resolve) => this._withToken(resolve));
    if (token) headers.Authorization = `Bearer ${token}`;
    if (idempotencyKey !== undefined) headers['Idempotency-Key'] = String(idempotencyKey);
    const response = await fetch(`${this._base.http}/api/topics/${encodeURIComponent(topic)}/messages`,
      { method: 'POST', headers, body, signal: abort ? abort.signal : undefined });
    const text = await response.text();
    let answer = null;
    try { answer = text ? JSON.parse(text) : null; } catch { answer = null; }
    if (!response.ok || !answer || typeof answer.seq !== 'number') {
      const error = new Error(`publish to ${topic}: ${response.status} ${answer?.detail ?? response.statusText}`);
      error.code = answer?.error ?? 'unavailable';
      error.status = response.status;
      throw error;
    }
    return answer.seq;
  }

  /**
   * Commits a change set to `store` over the WebSocket: `changes` are the operations of
   * `POST /api/stores/{store}/changes` (`put`, `patch`, `set`, `delete`; a malformed one throws a
   * TypeError), applied together or not at all. It is allowed by the connection's `write` grant
   * or by the backend's write hook. Resolves with the store's version after it; rejects with an
   * Error carrying the gateway's `code`: `forbidden`, `unauthorized`, `precondition_failed` (with
   * `version`: nothing was applied), `no_such_store`, `bad_message` (also, at once and with
   * nothing sent, for changes the gateway could not read: a value JSON cannot hold, nesting past
   * 256 levels, a lone UTF-16 surrogate), `rate_limited`, `unavailable` (the backend's hook did
   * not answer; the connection closed before the answer, or none came within `requestTimeoutMs`:
   * the outcome is then unknown; the WebSocket did not open in that time: nothing was sent).
   */
  commit(store, changes, { ifVersion, ifMatch } = {}) {
    if (typeof store !== 'string' || store === '') throw new TypeError('commit: the store name must be a non-empty string');
    validateChanges(changes);
    if (ifVersion !== undefined && (!Number.isSafeInteger(ifVersion) || ifVersion < 0)) throw new TypeError('commit: `ifVersion` must be a whole number');
    if (ifMatch !== undefined && !isObject(ifMatch)) throw new TypeError('commit: `ifMatch` must map model ids to entity tags');
    const ref = `c${this._commitCount + 1}`;
    const message = { type: 'commit', store, changes, ref };
    if (ifVersion !== undefined) message.ifVersion = ifVersion;
    if (ifMatch !== undefined) message.ifMatch = ifMatch;
    return this._call(ref, `commit to ${store}`, message);
  }

  /**
   * Calls the backend's RPC hook with `method` and `data` (any JSON value) over the WebSocket
   * (`docs/HOOKS.md`). Resolves with the hook's answer; rejects with an Error whose `code` is
   * `unavailable` (as for `commit`), `forbidden`, `rpc_failed`, `unauthorized`, `rate_limited`,
   * or `bad_message` (at once, with nothing sent, for data the gateway could not read).
   */
  rpc(method, data = null) {
    if (typeof method !== 'string' || method === '') throw new TypeError('rpc: the method must be a non-empty string');
    // No value at all is a mistake in the call; a value JSON cannot hold (a BigInt, a cycle) is
    // refused with `bad_message`, as for `commit`.
    if (data === undefined || typeof data === 'function' || typeof data === 'symbol') throw new TypeError('rpc: `data` must be a JSON value');
    const id = `r${this._commitCount + 1}`;
    return this._call(id, `rpc ${method}`, { type: 'rpc', id, method, data });
  }

  /**
   * Sends a commit or an RPC and waits for the answer to `key`, at most `requestTimeoutMs`. Made
   * while the WebSocket is not open, it waits for it within that time (and opens it when the
   * client has none: a client with no subscription connects for its calls). A message the gateway
   * could not read (its refusal would carry no `ref`) is refused here with `bad_message`.
   */
  _call(key, label, message) {
    if (this._closed) return failed(label, 'unavailable', 'the client is closed');
    if (this._transport !== 'websocket') return failed(label, 'unavailable', 'calls need the WebSocket, and the client uses SSE');
    if (this._commits.size >= DEFAULTS.maxPendingCommits) return failed(label, 'rate_limited', `${DEFAULTS.maxPendingCommits} calls are waiting already`);
    const { text, problem } = encodeMessage(message);
    if (problem) return failed(label, 'bad_message', `${problem}; nothing was sent`);
    this._commitCount += 1;
    return new Promise((resolve, reject) => {
      const call = { resolve, reject, label, text, sent: false };
      call.timer = setTimeout(() => this._callTimedOut(key), this._requestTimeoutMs);
      this._commits.set(key, call);
      if (this._open) this._sendCall(key, call);
      else this._connectIfIdle();
    });
  }

  _sendCall(key, call) {
    try {
      this._socket.send(call.text);
      call.sent = true;
    } catch (error) {
      this._takeCall(key);
      call.reject(unavailable(`${call.label}: the WebSocket did not take the message (${error && error.message ? error.message : error})`));
    }
  }

  _callTimedOut(key) {
    const call = this._takeCall(key);
    if (!call) return;
    const ms = this._requestTimeoutMs;
    call.reject(unavailable(call.sent ? `${call.label}: no answer within ${ms} ms; its outcome is unknown`
      : `${call.label}: the WebSocket did not open within ${ms} ms; nothing was sent`));
  }

  /** The call waiting under `key`, no longer waiting (its deadline cancelled), or undefined. */
  _takeCall(key) {
    const call = this._commits.get(key);
    if (call === undefined) return undefined;
    this._commits.delete(key);
    clearTimeout(call.timer);
    return call;
  }

  /**
   * The socket is gone: no answer comes to the calls it carried. Those not sent yet wait for the
   * next socket (within their deadline), unless `unsent` says why none will come.
   */
  _failCommits(unsent = null) {
    for (const [key, call] of [...this._commits]) {
      if (!call.sent && unsent === null) continue;
      this._takeCall(key);
      call.reject(unavailable(call.sent ? `${call.label}: the connection closed before the answer; its outcome is unknown`
        : `${call.label}: ${unsent}; nothing was sent`));
    }
  }

  /** A commit's or an RPC's answer, matched by its `ref` or `id`; true if it was one. */
  _settleCommit(frame) {
    const key = frame.type === 'rpc_result' || frame.type === 'rpc_error' ? frame.id : frame.ref;
    const waiting = typeof key === 'string' && this._commits.get(key)?.sent ? this._takeCall(key) : undefined;
    if (!waiting) return false;
    if (frame.type === 'committed') {
      waiting.resolve(frame.version);
    } else if (frame.type === 'rpc_result') {
      waiting.resolve(frame.data);
    } else {
      const error = new Error(`${waiting.label}: ${frame.message ?? frame.code}`);
      error.code = String(frame.code ?? 'error');
      if (typeof frame.version === 'number') error.version = frame.version;
      waiting.reject(error);
    }
    return true;
  }

  /**
   * Follows a topic: every message from now on, or after `since` when given, of the topic's life
   * `epoch` when given (what `saved()` keeps): one of another life is answered with `reset`.
   */
  subscribeTopic(name, options = {}) {
    if (typeof name !== 'string' || name === '') throw new TypeError('subscribeTopic: the topic name must be a non-empty string');
    if (!isObject(options)) throw new TypeError('subscribeTopic: options must be an object');
    for (const key of STORE_OPTION_KEYS) {
      if (options[key] !== undefined) throw new TypeError(`subscribeTopic: \`${key}\` applies to stores only`);
    }
    const since = options.since;
    if (since !== undefined && (!Number.isSafeInteger(since) || since < 0)) throw new TypeError('subscribeTopic: `since` must be a whole number');
    const epoch = options.epoch ?? null;
    if (epoch !== null && since === undefined) throw new TypeError('subscribeTopic: `epoch` goes with `since`');
    if (epoch !== null && (typeof epoch !== 'string' || epoch === '' || utf8Length(epoch) > LIMITS.maxEpochBytes)) {
      throw new TypeError(`subscribeTopic: \`epoch\` must be a non-empty string of at most ${LIMITS.maxEpochBytes} bytes`);
    }
    if (options.presence !== undefined && typeof options.presence !== 'boolean') throw new TypeError('subscribeTopic: `presence` must be true or false');
    return this._add(new TopicSubscription(this, name, since === undefined ? null : since, options.presence === true, epoch));
  }

  /** Ends every subscription and the connection. */
  close() {
    if (this._closed) return;
    this._closed = true;
    this._cancelRetry();
    this._dropSocket('the client is closed');
    for (const sub of [...this._subs]) sub.unsubscribe();
    this._subs.clear();
    if (typeof window !== 'undefined' && window.removeEventListener) {
      window.removeEventListener('online', this._onOnline);
      window.removeEventListener('offline', this._onOffline);
    }
    this._setStatus('closed');
  }

  // -- Subscriptions --

  _add(sub) {
    if (this._closed) throw new Error('ReceptionistClient: the client is closed');
    for (const other of this._subs) {
      if (other._key === sub._key) {
        throw new Error(`ReceptionistClient: this client already subscribes to ${sub.kind} '${sub.name}' ` +
          '(one subscription per store and per topic on a connection; use another client)');
      }
    }
    this._subs.add(sub);
    if (this._transport === 'sse') {
      sub._startSse();
    } else if (this._open) {
      this._sendSubscribe(sub);
    } else {
      this._connectIfIdle(); // one connection (one token asked) for the subscriptions made meanwhile
      this._mirrorStatus(sub);
    }
    return sub;
  }

  _remove(sub) {
    this._subs.delete(sub);
    const lease = sub._lease;
    sub._lease = null;
    if (lease && !lease.dead) {
      lease.dead = true;
      if (this._open) this._send({ type: 'unsubscribe', [sub.kind]: sub.name }, { kind: 'unsubscribe', key: sub._key, lease });
    }
  }

  /** Over WebSocket: replaces the gateway's subscription for `sub` with a fresh one from what it holds. */
  _resubscribe(sub) {
    if (!this._open || this._closed) return; // a reconnect resubscribes anyway
    const lease = sub._lease;
    if (lease && !lease.dead) {
      lease.dead = true;
      this._send({ type: 'unsubscribe', [sub.kind]: sub.name }, { kind: 'unsubscribe', key: sub._key, lease });
    }
    this._sendSubscribe(sub);
  }

  _sendSubscribe(sub) {
    sub._cancelRetry();
    const lease = { sub, dead: false };
    sub._lease = lease;
    let route = this._routes.get(sub._key);
    if (!route) this._routes.set(sub._key, (route = []));
    route.push(lease);
    if (sub.status !== 'live') sub._setStatus('connecting');
    this._send(sub._subscribeMessage(), { kind: 'subscribe', key: sub._key, lease });
  }

  /** A refused subscription's retry: the token is presented again first when it was the reason. */
  _retrySubscribe(sub, error) {
    if (sub.closed || this._closed || this._transport !== 'websocket' || !this._open) return;
    if (TOKEN_ERRORS.has(error.code) && this._token) {
      const generation = this._generation;
      this._withToken((token) => {
        if (generation !== this._generation || !this._open || sub.closed) return;
        if (token && this._tokenIn === 'message') this._send({ type: 'auth', token }, { kind: 'auth' });
        this._sendSubscribe(sub);
      });
    } else {
      this._sendSubscribe(sub);
    }
  }
}
