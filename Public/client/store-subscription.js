// StoreSubscription: a live local copy of one store.

import { applyChange } from './changes.js';
import { hasOwn, isObject } from './helpers.js';
import { STORE_OPTION_KEYS } from './options.js';
import { Subscription } from './subscription.js';

/**
 * A live local copy of one store (projected by `models` and `paths` when given).
 *
 * Events: 'snapshot' {version, epoch, reset, models}, 'presence' (with `presence: true`: see `presence`), 'change' {model, path, kind, value, old},
 * 'frame' {type, version, from, conflated, committedAt, firstCommittedAt, changes, bytes,
 * receivedAt}, 'resumed' {version}, 'status' {status, retryAt, error, transport}, 'error'
 * {code, message}. What a listener is given stays as it was: the copy changes by replacing
 * models and the objects in them, never by changing them in place (client/changes.js).
 */
export class StoreSubscription extends Subscription {
  constructor(client, name, options) {
    super(client, 'store', name, options.presence === true);
    const { since, epoch, state, ...rest } = options;
    this.options = Object.freeze(rest);
    this._models = since === undefined ? new Map() : new Map(Object.entries(state)); // never changed in place
    this._version = since ?? null;
    this._epoch = epoch ?? null;
    // Filtered frames leave versions out ("nothing filtered out is sent"), so only an
    // unfiltered subscription can tell a skipped version from one that had nothing for it.
    this._filtered = options.models !== undefined || options.paths !== undefined;
    this._listedPaths = options.paths ? options.paths.map((path) => path.split('.')) : null;
  }

  /** model id → value, as last applied. Read it; do not change it (a model taken from it stays as it was). */
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

  // The gateway names the filter it applies, which the subscribe hook may have narrowed from
  // what was asked: versions it leaves out are filtered out, not lost.
  // A frame without one: none applies beyond what was asked (a hook may allow all after a reconnect).
  _takeFilter(frame) {
    const { models, paths } = this.options;
    const filter = isObject(frame.filter) ? frame.filter : null;
    this._filtered = filter !== null || models !== undefined || paths !== undefined;
    const listed = Array.isArray(filter?.paths) ? filter.paths : paths;
    this._listedPaths = listed ? listed.map((path) => String(path).split('.')) : null;
  }

  _onSnapshot(frame, bytes) {
    if (typeof frame.version !== 'number' || !isObject(frame.models)) return;
    this._takeFilter(frame);
    const reset = frame.reset === true || this._version !== null;
    this._models = new Map(Object.entries(frame.models));
    this._version = frame.version;
    if (typeof frame.epoch === 'string') this._epoch = frame.epoch;
    this._countFrame(bytes);
    this._becameLive();
    // The models as of this snapshot: the Map is the listener's own; the values are never changed.
    if (this._listens('snapshot')) this._emit('snapshot', { version: this._version, epoch: this._epoch, reset, models: new Map(this._models) });
    this._emit('frame', this._meta(frame, bytes, 0));
  }

  _onSubscribed(frame, bytes) {
    this._takeFilter(frame);
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
