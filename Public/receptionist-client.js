// receptionist-client.js: a browser client for the Receptionist gateway (docs/CLIENT.md).
//
// An ES module with no dependency and no build step:
//
//   import { ReceptionistClient } from '/receptionist-client.js';
//   const client = new ReceptionistClient();
//   const tiles = client.subscribeStore('tiles', { paths: ['color'], maxRate: 10 });
//   tiles.on('frame', () => render(tiles.models));
//
// One client holds one WebSocket (`/ws`, subprotocol `receptionist.v1`) shared by all of its
// subscriptions, at most one per store and one per topic (the protocol's rule for a connection).
// Over Server-Sent Events each subscription has an EventSource of its own. After any drop the
// client reconnects with exponential backoff and jitter and resumes every subscription with
// `since` (and a store's `epoch`). docs/PROTOCOL.md specifies the messages.
//
// Nothing is buffered: a subscription keeps its current state and version, and what the browser
// has not delivered yet stays in the browser's own socket buffers.

const PROTOCOL = 'receptionist.v1';

const DEFAULTS = Object.freeze({
  backoffBaseMs: 500,
  backoffMaxMs: 15000,
  // WebSocket attempts in a row that fail before ever opening, after which transport 'auto'
  // switches to SSE (a proxy that refuses upgrades fails every time; one that opened once is just down).
  fallbackAfter: 3,
  // The most a `draining` message may make the client wait before it reconnects.
  maxDrainDelayMs: 30000,
  // Commits sent and not yet answered; past it `commit()` refuses at once.
  maxPendingCommits: 1000,
});

/**
 * The limits a subscription's options keep: the gateway's own (docs/PROTOCOL.md, "Limits"), so
 * that what the gateway would refuse for good is refused here, before anything is sent.
 * Tests/e2e/test_limits.py holds this table, the gateway's and the document's equal.
 */
export const LIMITS = Object.freeze({
  maxModels: 1024, // model ids one store subscription may list
  maxPaths: 64, // key paths one store subscription may list
  minRate: 0.01, // the slowest maxRate: a frame in 100 s
  maxRate: 1000, // the fastest maxRate
  maxEpochBytes: 64, // bytes of a store epoch
  maxSince: Number.MAX_SAFE_INTEGER, // the highest since: 2^53 - 1
  maxRefBytes: 64, // bytes of a commit's ref or an RPC's id
});

const utf8Bytes = (text) => new TextEncoder().encode(text).length;

// Refusals that a retry cannot cure: the request itself is wrong.
const PERMANENT_ERRORS = new Set(['bad_message', 'invalid_topic', 'unknown_type']);
// Refusals that a fresh token may cure; the retry presents the token again first.
const TOKEN_ERRORS = new Set(['unauthorized', 'forbidden', 'token_invalid', 'token_expired']);

const STORE_OPTION_KEYS = ['models', 'paths', 'maxRate', 'old'];

// ---- Small helpers -------------------------------------------------------------------------

const hasOwn = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
const ownValue = (object, key) => (hasOwn(object, key) ? object[key] : undefined);

/** Sets `object[key]` as an own property, even for the key `__proto__`. */
function setOwn(object, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

/** The UTF-8 length of a string, without encoding it. */
function utf8Length(text) {
  let bytes = text.length;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) { bytes += 2; i += 1; } // a pair: 4 bytes
    else bytes += 2;
  }
  return bytes;
}

function reportListenerError(error) {
  if (typeof globalThis.reportError === 'function') globalThis.reportError(error);
  else setTimeout(() => { throw error; });
}

function browserOffline() {
  return typeof navigator !== 'undefined' && navigator.onLine === false;
}

/** The gateway's base URLs, from `url` (http, https, ws or wss; default: the page's origin). */
function resolveBase(url) {
  const page = typeof location !== 'undefined' ? location.href : undefined;
  if (url === undefined && page === undefined) throw new TypeError('ReceptionistClient: `url` is required outside a page');
  const parsed = new URL(url === undefined ? '/' : String(url), page);
  const secure = parsed.protocol === 'https:' || parsed.protocol === 'wss:';
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(parsed.protocol)) {
    throw new TypeError(`ReceptionistClient: unsupported URL scheme ${parsed.protocol}`);
  }
  const path = parsed.pathname.replace(/\/+$/, '');
  return {
    http: `${secure ? 'https:' : 'http:'}//${parsed.host}${path}`,
    ws: `${secure ? 'wss:' : 'ws:'}//${parsed.host}${path}`,
  };
}

/** Checks store options as the gateway does, so a bad one fails here, on either transport. */
function validateStoreOptions(options) {
  if (!isObject(options)) throw new TypeError('subscribeStore: options must be an object');
  const out = {};
  if (options.models !== undefined) {
    const models = options.models;
    if (!Array.isArray(models) || models.length === 0) throw new TypeError('subscribeStore: `models` must be a non-empty list');
    if (models.length > LIMITS.maxModels) throw new TypeError(`subscribeStore: \`models\` may list at most ${LIMITS.maxModels} ids`);
    for (const id of models) {
      if (typeof id !== 'string' || id === '') throw new TypeError(`subscribeStore: bad model id ${JSON.stringify(id)} in \`models\``);
    }
    out.models = [...models];
  }
  if (options.paths !== undefined) {
    const paths = options.paths;
    if (!Array.isArray(paths) || paths.length === 0) throw new TypeError('subscribeStore: `paths` must be a non-empty list');
    if (paths.length > LIMITS.maxPaths) throw new TypeError(`subscribeStore: \`paths\` may list at most ${LIMITS.maxPaths} key paths`);
    for (const path of paths) {
      if (typeof path !== 'string' || path.split('.').some((segment) => segment === '')) {
        throw new TypeError(`subscribeStore: bad path ${JSON.stringify(path)} in \`paths\``);
      }
    }
    out.paths = [...paths];
  }
  if (options.maxRate !== undefined) {
    const rate = options.maxRate;
    if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < LIMITS.minRate || rate > LIMITS.maxRate) {
      throw new TypeError(`subscribeStore: \`maxRate\` must be a number with ${LIMITS.minRate} ≤ maxRate ≤ ${LIMITS.maxRate}`);
    }
    out.maxRate = rate;
  }
  if (options.old !== undefined) {
    if (typeof options.old !== 'boolean') throw new TypeError('subscribeStore: `old` must be true or false');
    if (options.old) out.old = true;
  }
  if (options.presence !== undefined) {
    if (typeof options.presence !== 'boolean') throw new TypeError('subscribeStore: `presence` must be true or false');
    if (options.presence) out.presence = true;
  }
  // Resuming a copy kept from before (a page reload: `saved()`): the version it is at, its
  // epoch, and the models as they were then; the gateway sends only what changed since.
  if (options.since !== undefined) {
    if (!Number.isSafeInteger(options.since) || options.since < 0) {
      throw new TypeError('subscribeStore: `since` must be a non-negative integer');
    }
    if (!isObject(options.state)) {
      throw new TypeError('subscribeStore: `since` needs `state`, the models at that version (see saved())');
    }
    if (options.epoch !== undefined && (typeof options.epoch !== 'string' || options.epoch === '' ||
        utf8Bytes(options.epoch) > LIMITS.maxEpochBytes)) {
      throw new TypeError(`subscribeStore: \`epoch\` must be a non-empty string of at most ${LIMITS.maxEpochBytes} bytes`);
    }
    out.since = options.since;
    out.state = options.state;
    if (options.epoch !== undefined) out.epoch = options.epoch;
  } else if (options.epoch !== undefined || options.state !== undefined) {
    throw new TypeError('subscribeStore: `epoch` and `state` go with `since`');
  }
  return out;
}

// ---- Events --------------------------------------------------------------------------------

class Emitter {
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

// ---- Applying changes ----------------------------------------------------------------------

/**
 * Applies one change to `models` (a Map of model id to value), as docs/PROTOCOL.md says for a
 * (projected) copy: set the value at the path, creating the model and the objects on the way, or
 * remove it; after a removal under `paths`, drop the objects left empty above the listed path.
 * Returns the value the path held before (undefined when it held none).
 */
function applyChange(models, change, listedPaths) {
  const id = change.model;
  const path = typeof change.path === 'string' ? change.path : '';
  const removes = change.kind === 'deleted' || change.value === undefined;
  if (path === '') {
    const previous = models.get(id);
    if (removes) models.delete(id);
    else models.set(id, change.value);
    return previous;
  }
  const keys = path.split('.');
  const last = keys[keys.length - 1];
  if (removes) {
    const root = models.get(id);
    if (!isObject(root)) return undefined;
    const chain = [root]; // chain[d]: the object at the path's first d keys
    let node = root;
    for (const key of keys.slice(0, -1)) {
      const next = ownValue(node, key);
      if (!isObject(next)) return undefined; // nothing there to remove
      chain.push(next);
      node = next;
    }
    const previous = ownValue(node, last);
    if (hasOwn(node, last)) delete node[last];
    if (listedPaths) pruneAbove(chain, keys, listedPaths);
    return previous;
  }
  let node = models.get(id);
  if (!isObject(node)) {
    node = {};
    models.set(id, node);
  }
  for (const key of keys.slice(0, -1)) {
    let next = ownValue(node, key);
    if (!isObject(next)) {
      next = {};
      setOwn(node, key, next);
    }
    node = next;
  }
  const previous = ownValue(node, last);
  setOwn(node, last, change.value);
  return previous;
}

/**
 * After a removal at `keys`: the objects strictly above the outermost listed path that covers
 * `keys` exist in a projection only to lead to it; drop those left empty, deepest first. The
 * model itself (depth 0) stays: it still exists in the store.
 */
function pruneAbove(chain, keys, listedPaths) {
  let depth = 0; // the length of the shortest listed path that is a prefix of `keys`
  for (const listed of listedPaths) {
    if (listed.length <= keys.length && listed.every((key, i) => key === keys[i])) {
      if (depth === 0 || listed.length < depth) depth = listed.length;
    }
  }
  for (let d = Math.min(depth - 1, chain.length - 1); d >= 1; d -= 1) {
    if (Object.keys(chain[d]).length > 0) break;
    delete chain[d - 1][keys[d - 1]];
  }
}

// ---- Subscriptions -------------------------------------------------------------------------

class Subscription extends Emitter {
  constructor(client, kind, name, presence = false) {
    super();
    this._client = client;
    this.kind = kind;
    this.name = name;
    // With `presence: true`: who else subscribes, kept from the gateway's presence frames.
    this._followsPresence = presence;
    this._presence = { members: new Map(), clients: 0, users: 0, countsOnly: false };
    this._key = `${kind}:${name}`;
    this._status = 'connecting';
    this._retryAt = null;
    this._error = null;
    this._closed = false;
    this._failures = 0; // refusals or SSE failures in a row
    this._retryTimer = null;
    this._lease = null; // the WebSocket subscription this object currently speaks for
    this._source = null; // the EventSource, over SSE
    this._sseGeneration = 0;
    this._drainDelay = null;
    this.frames = 0;
    this.bytes = 0;
  }

  /**
   * Who subscribes, with `presence: true`: {members: Map of client id → {client, user, info,
   * joinedAt}, clients, users, countsOnly}. Past the gateway's member limit only the counts are
   * kept (`countsOnly`, and no members).
   */
  get presence() { return this._presence; }

  /**
   * One presence frame (docs/PROTOCOL.md, Presence): a whole list replaces the local one, joins
   * and leaves change it by client id, counts only drop it. Emits 'presence' with the state and
   * what this frame changed.
   */
  _onPresence(frame, bytes) {
    this._countFrame(bytes);
    const state = this._presence;
    const joins = Array.isArray(frame.joins) ? frame.joins.filter(isObject) : [];
    const leaves = Array.isArray(frame.leaves) ? frame.leaves.filter(isObject) : [];
    if (frame.countsOnly === true) {
      state.members = new Map();
      state.countsOnly = true;
    } else if (Array.isArray(frame.members)) {
      state.members = new Map(frame.members.filter(isObject).map((member) => [member.client, member]));
      state.countsOnly = false;
    } else {
      for (const member of joins) state.members.set(member.client, member);
      for (const member of leaves) state.members.delete(member.client);
    }
    if (typeof frame.clients === 'number') state.clients = frame.clients;
    if (typeof frame.users === 'number') state.users = frame.users;
    this._emit('presence', { ...state, joins, leaves, whole: Array.isArray(frame.members) || frame.countsOnly === true });
  }

  _presenceParams(params) {
    if (this._followsPresence) params.push(['presence', 'true']);
  }

  /** 'connecting', 'live', 'reconnecting', 'offline', 'failed' or 'closed'. */
  get status() { return this._status; }

  get closed() { return this._closed; }

  /** Stops the subscription; no event follows except its 'status' 'closed'. */
  unsubscribe() {
    if (this._closed) return;
    this._closed = true;
    this._cancelRetry();
    this._stopSse();
    this._client._remove(this);
    this._setStatus('closed');
  }

  _setStatus(status, { retryAt = null, error = null } = {}) {
    if (this._closed && status !== 'closed') return;
    if (status === this._status && retryAt === this._retryAt && error === this._error) return;
    this._status = status;
    this._retryAt = retryAt;
    this._error = error;
    this._emit('status', { status, retryAt, error, transport: this._client.transport });
  }

  _cancelRetry() {
    if (this._retryTimer !== null) clearTimeout(this._retryTimer);
    this._retryTimer = null;
  }

  _becameLive() {
    this._failures = 0;
    this._setStatus('live');
  }

  _countFrame(bytes) {
    this.frames += 1;
    this.bytes += bytes;
  }

  /** The gateway refused this subscription (an `error` answering its `subscribe`). */
  _refused(error) {
    this._emit('error', error);
    if (PERMANENT_ERRORS.has(error.code)) {
      this._setStatus('failed', { error });
      return;
    }
    const delay = this._client._backoff(this._failures);
    this._failures += 1;
    this._cancelRetry();
    this._retryTimer = setTimeout(() => {
      this._retryTimer = null;
      this._client._retrySubscribe(this, error);
    }, delay);
    this._setStatus('reconnecting', { retryAt: Date.now() + delay, error });
  }

  /** The stream lost its place (a skipped version or sequence number): resume from what is kept. */
  _resync() {
    if (this._closed) return;
    if (this._client.transport === 'sse') this._startSse();
    else this._client._resubscribe(this);
  }

  // -- Server-Sent Events, one EventSource per subscription --

  _startSse() {
    this._stopSse();
    this._cancelRetry();
    if (this._closed) return;
    if (browserOffline()) {
      this._setStatus('offline');
      return;
    }
    const generation = ++this._sseGeneration;
    this._setStatus('connecting');
    this._client._withToken((token) => {
      if (generation !== this._sseGeneration || this._closed) return;
      const url = this._sseUrl(token);
      let source;
      try {
        source = new this._client._EventSource(url);
      } catch (error) {
        this._sseLost(generation);
        return;
      }
      this._source = source;
      const onEvent = (event) => {
        if (generation !== this._sseGeneration || typeof event.data !== 'string') return;
        let frame;
        try { frame = JSON.parse(event.data); } catch { return; }
        if (!isObject(frame)) return;
        const bytes = utf8Length(event.data);
        if (frame.type === 'draining') {
          this._drainDelay = this._client._drainDelay(frame);
          this._client._emit('draining', { reconnectAfterMs: this._drainDelay, subscription: this });
          return;
        }
        this._onFrame(frame, bytes);
      };
      for (const name of ['snapshot', 'subscribed', 'changes', 'message', 'gap', 'reset', 'presence', 'draining']) {
        source.addEventListener(name, onEvent);
      }
      // An event named `error` carries data; the EventSource's own errors do not. EventSource
      // would retry by itself, but without backoff or `since`; the client takes it over.
      source.onerror = (event) => {
        if (generation !== this._sseGeneration) return;
        if (typeof event.data === 'string') {
          let frame = null;
          try { frame = JSON.parse(event.data); } catch { /* not JSON: ignore */ }
          if (isObject(frame)) this._onStreamError(frame);
          return;
        }
        source.close();
        this._source = null;
        this._sseLost(generation);
      };
    });
  }

  _stopSse() {
    this._sseGeneration += 1;
    if (this._source) this._source.close();
    this._source = null;
  }

  _sseLost(generation) {
    if (generation !== this._sseGeneration || this._closed) return;
    this._cancelRetry();
    if (browserOffline()) {
      this._setStatus('offline');
      return;
    }
    let delay;
    if (this._drainDelay !== null) {
      delay = this._drainDelay;
      this._drainDelay = null;
    } else {
      delay = this._client._backoff(this._failures);
      this._failures += 1;
    }
    this._retryTimer = setTimeout(() => { this._retryTimer = null; this._startSse(); }, delay);
    this._setStatus('reconnecting', { retryAt: Date.now() + delay });
  }

  /** An `error` event on this subscription's SSE stream (a token that ran out, say). */
  _onStreamError(frame) {
    const error = { code: String(frame.code || 'error'), message: String(frame.message || frame.code || 'error') };
    this._emit('error', error);
    this._client._emit('error', { ...error, subscription: this });
  }

  /** `?name=value&…` from [name, value or list of values] pairs, and the token if any. */
  _sseQuery(params, token) {
    if (token) params.push(['token', token]);
    const query = params.map(([name, value]) => `${name}=${Array.isArray(value)
      ? value.map(encodeURIComponent).join(',') : encodeURIComponent(value)}`).join('&');
    return query ? `?${query}` : '';
  }
}

/**
 * A live local copy of one store (projected by `models` and `paths` when given).
 *
 * Events: 'snapshot' {version, epoch, reset, models}, 'presence' (with `presence: true`: see `presence`), 'change' {model, path, kind, value, old},
 * 'frame' {type, version, from, conflated, committedAt, firstCommittedAt, changes, bytes,
 * receivedAt}, 'resumed' {version}, 'status' {status, retryAt, error, transport}, 'error'
 * {code, message}.
 */
export class StoreSubscription extends Subscription {
  constructor(client, name, options) {
    super(client, 'store', name, options.presence === true);
    const { since, epoch, state, ...rest } = options;
    this.options = Object.freeze(rest);
    this._models = since === undefined ? new Map() : new Map(Object.entries(state));
    this._version = since ?? null;
    this._epoch = epoch ?? null;
    // Filtered frames leave versions out ("nothing filtered out is sent"), so only an
    // unfiltered subscription can tell a skipped version from one that had nothing for it.
    this._filtered = options.models !== undefined || options.paths !== undefined;
    this._listedPaths = options.paths ? options.paths.map((path) => path.split('.')) : null;
  }

  /** model id → value, as last applied. Read it; do not change it. */
  get models() { return this._models; }

  /** The version the local copy is at, or null before the first snapshot. */
  get version() { return this._version; }

  /** The life of the store that version belongs to (it changes when the store is created anew). */
  get epoch() { return this._epoch; }

  /** One model's value, or undefined. */
  get(id) { return this._models.get(id); }

  /** {id: value}: `JSON.stringify(subscription)` gives the state. */
  toJSON() { return Object.fromEntries(this._models); }

  /**
   * What to keep to resume after a reload, or null before the first snapshot: `{since, epoch,
   * state}`, plain JSON. Give it back with the same options: `subscribeStore(name, {...options,
   * ...saved})`; the gateway then sends only the change sets after `since` (or a reset snapshot
   * when it no longer has them, or the store's epoch changed).
   */
  saved() {
    if (this._version === null) return null;
    const saved = { since: this._version, state: this.toJSON() };
    if (this._epoch !== null) saved.epoch = this._epoch;
    return saved;
  }

  _subscribeMessage() {
    const message = { type: 'subscribe', store: this.name };
    for (const key of STORE_OPTION_KEYS) if (this.options[key] !== undefined) message[key] = this.options[key];
    if (this._followsPresence) message.presence = true;
    if (this._version !== null) message.since = this._version;
    if (this._version !== null && this._epoch !== null) message.epoch = this._epoch;
    return message;
  }

  _sseUrl(token) {
    const params = [];
    // Lists go comma-separated, each item encoded on its own, so the commas stay separators.
    if (this.options.models) params.push(['models', this.options.models]);
    if (this.options.paths) params.push(['paths', this.options.paths]);
    if (this.options.maxRate !== undefined) params.push(['maxRate', String(this.options.maxRate)]);
    if (this.options.old) params.push(['old', 'true']);
    this._presenceParams(params);
    if (this._version !== null) params.push(['since', String(this._version)]);
    if (this._version !== null && this._epoch !== null) params.push(['epoch', this._epoch]);
    return `${this._client._base.http}/api/stores/${encodeURIComponent(this.name)}/events${this._sseQuery(params, token)}`;
  }

  _onFrame(frame, bytes) {
    switch (frame.type) {
      case 'snapshot': return this._onSnapshot(frame, bytes);
      case 'presence': return this._onPresence(frame, bytes);
      case 'subscribed': return this._onSubscribed(frame, bytes);
      case 'changes': return this._onChanges(frame, bytes);
      default: return undefined;
    }
  }

  _onSnapshot(frame, bytes) {
    if (typeof frame.version !== 'number' || !isObject(frame.models)) return;
    const reset = frame.reset === true || this._version !== null;
    this._models = new Map(Object.entries(frame.models));
    this._version = frame.version;
    if (typeof frame.epoch === 'string') this._epoch = frame.epoch;
    this._countFrame(bytes);
    this._becameLive();
    this._emit('snapshot', { version: this._version, epoch: this._epoch, reset, models: this._models });
    this._emit('frame', this._meta(frame, bytes, 0));
  }

  _onSubscribed(frame, bytes) {
    if (this._version === null && typeof frame.version === 'number') this._version = frame.version;
    if (typeof frame.epoch === 'string') this._epoch = frame.epoch;
    this._countFrame(bytes);
    this._becameLive();
    this._emit('resumed', { version: this._version, resumed: frame.resumed === true });
    this._emit('frame', this._meta(frame, bytes, 0));
  }

  _onChanges(frame, bytes) {
    const version = frame.version;
    if (this._version === null || typeof version !== 'number') return;
    if (version <= this._version) return; // already applied: a replay overlapping what is held
    if (!this._filtered) {
      const from = frame.conflated === true && typeof frame.from === 'number' ? frame.from : version - 1;
      if (from > this._version) { // versions are missing: resume from what is held
        this._resync();
        return;
      }
    }
    const changes = Array.isArray(frame.changes) ? frame.changes : [];
    let applied = 0;
    for (const change of changes) {
      if (this._closed) return; // a listener unsubscribed
      if (!isObject(change) || typeof change.model !== 'string') continue;
      const previous = applyChange(this._models, change, this._listedPaths);
      applied += 1;
      this._emit('change', {
        model: change.model,
        path: typeof change.path === 'string' ? change.path : '',
        kind: change.kind,
        value: change.kind === 'deleted' ? null : change.value,
        old: hasOwn(change, 'old') ? change.old : previous,
      });
    }
    this._version = version;
    this._countFrame(bytes);
    this._emit('frame', this._meta(frame, bytes, applied));
  }

  _meta(frame, bytes, changes) {
    const meta = { type: frame.type, store: this.name, version: this._version, bytes, changes, receivedAt: Date.now() };
    if (frame.type === 'changes') {
      meta.conflated = frame.conflated === true;
      if (typeof frame.from === 'number') meta.from = frame.from;
      if (typeof frame.committedAt === 'number') meta.committedAt = frame.committedAt;
      meta.firstCommittedAt = typeof frame.firstCommittedAt === 'number' ? frame.firstCommittedAt : meta.committedAt;
    }
    if (frame.type === 'snapshot') meta.reset = frame.reset === true;
    return meta;
  }
}

/**
 * The messages of one topic, in sequence order.
 *
 * Events: 'message' {seq, data, publishedAt}, 'gap' {from, to}, 'reset' {seq, previous}, 'presence' (with `presence: true`),
 * 'frame' {type, seq, bytes, publishedAt, receivedAt}, 'status', 'error'.
 */
export class TopicSubscription extends Subscription {
  constructor(client, name, since, presence = false, epoch = null) {
    super(client, 'topic', name, presence);
    this._seq = since;
    this._epoch = epoch;
  }

  /** The last sequence number delivered (or skipped by a gap), or null before the subscription answers. */
  get seq() { return this._seq; }

  /** The life of the topic `seq` belongs to, or null before the subscription answers. */
  get epoch() { return this._epoch; }

  _subscribeMessage() {
    const message = { type: 'subscribe', topic: this.name };
    if (this._seq !== null) message.since = this._seq;
    if (this._seq !== null && this._epoch !== null) message.epoch = this._epoch;
    if (this._followsPresence) message.presence = true;
    return message;
  }

  _sseUrl(token) {
    const params = [];
    if (this._seq !== null) params.push(['since', String(this._seq)]);
    if (this._seq !== null && this._epoch !== null) params.push(['epoch', this._epoch]);
    this._presenceParams(params);
    return `${this._client._base.http}/api/topics/${encodeURIComponent(this.name)}/events${this._sseQuery(params, token)}`;
  }

  _onFrame(frame, bytes) {
    switch (frame.type) {
      case 'presence': return this._onPresence(frame, bytes);
      case 'subscribed': {
        // Not resumed: the messages after `seq` follow. Sequence numbers never go back within a
        // topic's life, so a topic behind what was asked for has started a new one (a restarted
        // gateway): that is reported, and its messages are taken from its start.
        this._countFrame(bytes);
        this._becameLive();
        this._emit('frame', { type: 'subscribed', seq: frame.seq, bytes, receivedAt: Date.now() });
        if (typeof frame.seq !== 'number') return;
        const sameLife = this._epoch === null || frame.epoch === undefined || frame.epoch === this._epoch;
        if (typeof frame.epoch === 'string') this._epoch = frame.epoch;
        if (frame.resumed === true && this._seq !== null) return;
        const previous = this._seq;
        // `reset`: the number asked for belongs to another life of the topic (another epoch: a
        // restarted gateway, or a cluster whose Redis lost its data). Older gateways say so only
        // by answering with a smaller number.
        if (previous !== null && (frame.reset === true || !sameLife || frame.seq < previous)) {
          this._seq = 0;
          this._emit('reset', { seq: frame.seq, previous });
          if (frame.seq > 0) this._resync();
          return;
        }
        this._seq = frame.seq;
        if (previous !== null && frame.seq > previous) this._emit('gap', { from: previous + 1, to: frame.seq });
        return;
      }
      case 'message': {
        const seq = frame.seq;
        if (typeof seq !== 'number' || this._seq === null || seq <= this._seq) return;
        if (seq !== this._seq + 1) { // the gateway never skips silently: resume from what was delivered
          this._resync();
          return;
        }
        this._seq = seq;
        this._countFrame(bytes);
        this._emit('message', { seq, data: frame.data, publishedAt: frame.publishedAt });
        this._emit('frame', { type: 'message', seq, bytes, publishedAt: frame.publishedAt, receivedAt: Date.now() });
        return;
      }
      case 'reset': {
        // The topic started over while subscribed: what was not delivered of its old numbering
        // may be lost; the messages after `seq` follow.
        if (typeof frame.seq !== 'number') return;
        const previous = this._seq;
        this._seq = frame.seq;
        if (typeof frame.epoch === 'string') this._epoch = frame.epoch;
        this._countFrame(bytes);
        this._emit('reset', { seq: frame.seq, previous });
        this._emit('frame', { type: 'reset', seq: frame.seq, bytes, receivedAt: Date.now() });
        return;
      }
      case 'gap': {
        if (typeof frame.from !== 'number' || typeof frame.to !== 'number') return;
        if (this._seq !== null && frame.to <= this._seq) return;
        this._seq = frame.to;
        this._countFrame(bytes);
        this._emit('gap', { from: frame.from, to: frame.to });
        this._emit('frame', { type: 'gap', seq: this._seq, bytes, receivedAt: Date.now() });
        return;
      }
      default:
        return;
    }
  }
}

// ---- The client ----------------------------------------------------------------------------

/**
 * A connection to one gateway.
 *
 * Options: url (default: the page's origin), token (a string, or a function returning one or a
 * promise of one, asked before every connection), tokenIn ('message': an `auth` message, the
 * default; 'query': `/ws?token=`), transport ('auto', 'websocket' or 'sse'), backoffBaseMs,
 * backoffMaxMs, fallbackAfter.
 *
 * Events: 'status' {status, retryAt, code} for the WebSocket ('connecting', 'open',
 * 'reconnecting', 'offline', 'closed'), 'close' {code, reason} when a WebSocket ends,
 * 'transport' {transport}, 'draining' {reconnectAfterMs}, 'authenticated' {expiresAt}, 'error'
 * {code, message, subscription?}.
 */
export class ReceptionistClient extends Emitter {
  constructor(options = {}) {
    super();
    const {
      url, token, tokenIn = 'message', transport = 'auto',
      backoffBaseMs = DEFAULTS.backoffBaseMs, backoffMaxMs = DEFAULTS.backoffMaxMs,
      fallbackAfter = DEFAULTS.fallbackAfter,
    } = options;
    if (!['auto', 'websocket', 'sse'].includes(transport)) throw new TypeError(`ReceptionistClient: unknown transport ${transport}`);
    if (!['message', 'query'].includes(tokenIn)) throw new TypeError(`ReceptionistClient: unknown tokenIn ${tokenIn}`);
    this._base = resolveBase(url);
    this._token = token;
    this._tokenIn = tokenIn;
    this._backoffBaseMs = backoffBaseMs;
    this._backoffMaxMs = backoffMaxMs;
    this._fallbackAfter = fallbackAfter;
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
    this._commits = new Map(); // ref → the commit or RPC waiting for its answer, which may come in any order
    this._commitCount = 0;
    this._routes = new Map(); // key → leases, oldest first: frames go to the first
    this._failures = 0;
    this._wsEverOpened = false;
    this._wsFailuresBeforeOpen = 0;
    this._retryTimer = null;
    this._retryAt = null;
    this._renewTimer = null;
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
   * (`forbidden`, `too_many_requests`, …) and `status`. `idempotencyKey` makes a retry safe.
   */
  async publish(topic, data, { idempotencyKey } = {}) {
    if (typeof topic !== 'string' || topic === '') throw new TypeError('publish: the topic name must be a non-empty string');
    const body = JSON.stringify(data);
    if (body === undefined) throw new TypeError('publish: `data` must be a JSON value');
    const headers = { 'Content-Type': 'application/json' };
    const token = await new Promise((resolve) => this._withToken(resolve));
    if (token) headers.Authorization = `Bearer ${token}`;
    if (idempotencyKey !== undefined) headers['Idempotency-Key'] = String(idempotencyKey);
    const response = await fetch(`${this._base.http}/api/topics/${encodeURIComponent(topic)}/messages`,
      { method: 'POST', headers, body });
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
   * Commits a change set to `store` over the open WebSocket: `changes` are the operations of
   * `POST /api/stores/{store}/changes` (`put`, `patch`, `set`, `delete`), applied together or not
   * at all. It is allowed by the connection's `write` grant (its token's, or the connect hook's)
   * or by the backend's write hook. Resolves with the store's version after it; rejects with an
   * Error carrying the gateway's `code`: `forbidden`, `unauthorized`, `precondition_failed` (with
   * `version`, when `ifVersion` or `ifMatch` no longer holds: nothing was applied),
   * `no_such_store`, `bad_message`, `unavailable` (the backend's hook did not answer, or the
   * connection is not open, or it closed before the answer: the outcome is then unknown).
   */
  commit(store, changes, { ifVersion, ifMatch } = {}) {
    if (typeof store !== 'string' || store === '') throw new TypeError('commit: the store name must be a non-empty string');
    if (!Array.isArray(changes) || changes.length === 0) throw new TypeError('commit: `changes` must be a non-empty array');
    if (ifVersion !== undefined && (!Number.isSafeInteger(ifVersion) || ifVersion < 0)) throw new TypeError('commit: `ifVersion` must be a whole number');
    if (ifMatch !== undefined && !isObject(ifMatch)) throw new TypeError('commit: `ifMatch` must map model ids to entity tags');
    const failed = (code, message) => Promise.reject(Object.assign(new Error(`commit to ${store}: ${message}`), { code }));
    if (!this._socket || !this._open || this._socket.send === undefined) return failed('unavailable', 'the WebSocket is not open');
    if (this._commits.size >= DEFAULTS.maxPendingCommits) return failed('rate_limited', `${DEFAULTS.maxPendingCommits} commits are waiting already`);
    const ref = `c${++this._commitCount}`;
    const message = { type: 'commit', store, changes, ref };
    if (ifVersion !== undefined) message.ifVersion = ifVersion;
    if (ifMatch !== undefined) message.ifMatch = ifMatch;
    return new Promise((resolve, reject) => {
      this._commits.set(ref, { resolve, reject, label: `commit to ${store}` });
      this._socket.send(JSON.stringify(message));
    });
  }

  /**
   * Calls the backend's RPC hook with `method` and `data` (any JSON value) over the open
   * WebSocket (`docs/HOOKS.md`). Resolves with the hook's answer; rejects with an Error whose
   * `code` is `unavailable` (the backend did not answer, or the connection is not open or closed
   * first), `forbidden`, `rpc_failed` or `unauthorized`.
   */
  rpc(method, data = null) {
    if (typeof method !== 'string' || method === '') throw new TypeError('rpc: the method must be a non-empty string');
    if (JSON.stringify(data) === undefined) throw new TypeError('rpc: `data` must be a JSON value');
    const failed = (code, message) => Promise.reject(Object.assign(new Error(`rpc ${method}: ${message}`), { code }));
    if (!this._socket || !this._open || this._socket.send === undefined) return failed('unavailable', 'the WebSocket is not open');
    if (this._commits.size >= DEFAULTS.maxPendingCommits) return failed('rate_limited', `${DEFAULTS.maxPendingCommits} calls are waiting already`);
    const id = `r${++this._commitCount}`;
    return new Promise((resolve, reject) => {
      this._commits.set(id, { resolve, reject, label: `rpc ${method}` });
      this._socket.send(JSON.stringify({ type: 'rpc', id, method, data }));
    });
  }

  /** A commit's or an RPC's answer, matched by its `ref` or `id`; true if it was one. */
  _settleCommit(frame) {
    const key = frame.type === 'rpc_result' || frame.type === 'rpc_error' ? frame.id : frame.ref;
    const waiting = typeof key === 'string' ? this._commits.get(key) : undefined;
    if (!waiting) return false;
    this._commits.delete(key);
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

  /** Follows a topic: every message from now on, or after `since` when given. */
  subscribeTopic(name, options = {}) {
    if (typeof name !== 'string' || name === '') throw new TypeError('subscribeTopic: the topic name must be a non-empty string');
    if (!isObject(options)) throw new TypeError('subscribeTopic: options must be an object');
    for (const key of STORE_OPTION_KEYS) {
      if (options[key] !== undefined) throw new TypeError(`subscribeTopic: \`${key}\` applies to stores only`);
    }
    const since = options.since;
    if (since !== undefined && (!Number.isSafeInteger(since) || since < 0)) throw new TypeError('subscribeTopic: `since` must be a whole number');
    if (options.presence !== undefined && typeof options.presence !== 'boolean') throw new TypeError('subscribeTopic: `presence` must be true or false');
    return this._add(new TopicSubscription(this, name, since === undefined ? null : since, options.presence === true));
  }

  /** Ends every subscription and the connection. */
  close() {
    if (this._closed) return;
    this._closed = true;
    this._cancelRetry();
    this._dropSocket();
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
    } else if (this._socket === null && this._retryTimer === null && this._status !== 'offline') {
      this._connect();
    } else {
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

  // -- The WebSocket --

  _connect() {
    this._cancelRetry();
    if (this._closed || this._transport !== 'websocket' || this._subs.size === 0) return;
    if (browserOffline()) {
      this._setStatus('offline');
      return;
    }
    const generation = ++this._generation;
    this._open = false;
    this._setStatus('connecting');
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
        opened = true;
        this._wsEverOpened = true;
        this._open = true;
        this._pending = [];
        this._routes = new Map();
        if (token && this._tokenIn === 'message') this._send({ type: 'auth', token }, { kind: 'auth' });
        this._setStatus('open');
        for (const sub of this._subs) if (sub.status !== 'failed') this._sendSubscribe(sub);
      };
      socket.onmessage = (event) => {
        if (generation !== this._generation || typeof event.data !== 'string') return;
        let frame;
        try { frame = JSON.parse(event.data); } catch { return; }
        if (isObject(frame)) this._onMessage(frame, utf8Length(event.data));
      };
      socket.onclose = (event) => {
        if (generation === this._generation) this._lost(generation, opened, event);
      };
    });
  }

  _send(message, pending) {
    if (!this._socket || !this._open) return;
    if (pending) this._pending.push(pending);
    this._socket.send(JSON.stringify(message));
  }

  _onMessage(frame, bytes) {
    const type = frame.type;
    const head = this._pending[0];
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
    if ((type === 'committed' || type === 'error' || type === 'rpc_result' || type === 'rpc_error') && this._settleCommit(frame)) return;
    if (type === 'error') {
      this._onError(frame);
      return;
    }
    const target = typeof frame.store === 'string' ? `store:${frame.store}`
      : typeof frame.topic === 'string' ? `topic:${frame.topic}` : null;
    if (target === null) return;
    const route = this._routes.get(target);
    if (type === 'unsubscribed') {
      if (head && head.kind === 'unsubscribe' && head.key === target) {
        this._pending.shift();
        this._dropLease(head.lease);
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
    this._renewTimer = setTimeout(() => {
      this._renewTimer = null;
      this._withToken((token) => {
        if (generation !== this._generation || !this._open || !token) return;
        this._send({ type: 'auth', token }, { kind: 'auth' });
      });
    }, Math.max(0, leftMs - Math.min(60_000, leftMs / 4)));
  }

  _cancelRenewal() {
    if (this._renewTimer) clearTimeout(this._renewTimer);
    this._renewTimer = null;
  }

  _lost(generation, opened, event) {
    if (generation !== this._generation) return;
    this._cancelRenewal();
    this._socket = null;
    this._open = false;
    this._pending = [];
    this._routes = new Map();
    for (const sub of this._subs) { sub._lease = null; sub._cancelRetry(); }
    const code = event && typeof event.code === 'number' ? event.code : 0;
    this._emit('close', { code, reason: event && event.reason ? String(event.reason) : '' });
    if (this._closed) return;
    if (this._requested === 'auto' && !opened && !this._wsEverOpened) {
      this._wsFailuresBeforeOpen += 1;
      if (this._wsFailuresBeforeOpen >= this._fallbackAfter && typeof this._EventSource === 'function') {
        this._transport = 'sse';
        this._cancelRetry();
        this._setStatus('idle');
        this._emit('transport', { transport: 'sse' });
        for (const sub of this._subs) sub._startSse();
        return;
      }
    }
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

  _dropSocket() {
    this._cancelRenewal();
    this._generation += 1;
    const socket = this._socket;
    this._socket = null;
    this._open = false;
    this._pending = [];
    this._routes = new Map();
    const commits = [...this._commits.values()];
    this._commits.clear();
    for (const waiting of commits) {
      waiting.reject(Object.assign(new Error(`${waiting.label}: the connection closed before the answer; its outcome is unknown`),
        { code: 'unavailable' }));
    }
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
    } else {
      for (const sub of this._subs) {
        if (sub.status === 'offline' || sub.status === 'reconnecting') { sub._failures = 0; sub._startSse(); }
      }
    }
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
    } else {
      for (const sub of this._subs) {
        if (sub.status !== 'live' && sub.status !== 'failed') {
          sub._cancelRetry();
          sub._stopSse();
          sub._setStatus('offline');
        }
      }
    }
  }
}

export default ReceptionistClient;
