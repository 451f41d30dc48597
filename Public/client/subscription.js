// Subscription: what a store and a topic subscription share (status, presence, retries, SSE).

import { Emitter } from './emitter.js';
import { PERMANENT_ERRORS } from './errors.js';
import { browserOffline, isObject, utf8Length } from './helpers.js';
import { SseHeartbeat } from './sse-heartbeat.js';

export class Subscription extends Emitter {
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
    this._resyncedAt = undefined; // the place the last resync resumed from
    this._resyncs = 0; // resyncs in a row that got no further than that place
    this._resyncWaits = false; // the retry timer is a resync's backoff
    this._retryTimer = null;
    this._lease = null; // the WebSocket subscription this object currently speaks for
    this._source = null; // the EventSource, over SSE
    this._sseGeneration = 0;
    this._sseTimer = null; // the connect deadline of the event stream being opened
    this._sseHeartbeat = null; // what watches the open event stream's silence (client/sse-heartbeat.js)
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
    // The members as of this frame: a Map of the listener's own (the state's changes in place).
    this._emit('presence', { ...state, members: new Map(state.members), joins, leaves, whole: Array.isArray(frame.members) || frame.countsOnly === true });
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

  /** Once closed (by a listener too, within an event), nothing but the 'closed' status is emitted. */
  _silenced(name) { return this._closed && name !== 'status'; }

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
      if (this._client.transport === 'sse') this._startSse();
      else this._client._retrySubscribe(this, error);
    }, delay);
    this._setStatus('reconnecting', { retryAt: Date.now() + delay, error });
  }

  /**
   * The stream lost its place (a skipped version or sequence number): resume from what is kept.
   * At once the first time; again from the same place, after the backoff: a gateway whose
   * replay skips the same number every time is not asked thousands of times a second. Frames
   * that skip while a resume waits its backoff change nothing: it is not put off again.
   */
  _resync() {
    if (this._closed || (this._resyncWaits && this._retryTimer !== null)) return;
    const at = this.kind === 'store' ? this._version : this._seq;
    this._resyncs = at === this._resyncedAt ? this._resyncs + 1 : 0;
    this._resyncedAt = at;
    const resume = () => {
      if (this._closed) return;
      if (this._client.transport === 'sse') this._startSse();
      else this._client._resubscribe(this);
    };
    if (this._resyncs === 0) return resume();
    this._cancelRetry();
    this._resyncWaits = true;
    this._retryTimer = setTimeout(() => {
      this._retryTimer = null;
      this._resyncWaits = false;
      resume();
    }, this._client._backoff(this._resyncs - 1));
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
    this._sseTimer = setTimeout(() => this._sseTimedOut(generation), this._client._connectTimeoutMs);
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
      let opened = false;
      source.onopen = () => {
        opened = true;
        this._clearSseTimer();
        this._watchSse(generation);
      };
      const onEvent = (event) => {
        if (generation !== this._sseGeneration) return;
        this._sseHeard();
        if (typeof event.data !== 'string') return;
        let frame;
        try { frame = JSON.parse(event.data); } catch { return; }
        if (!isObject(frame)) return;
        const bytes = utf8Length(event.data);
        if (frame.type === 'draining') {
          this._drainDelay = this._client._drainDelay(frame);
          this._client._emit('draining', { reconnectAfterMs: this._drainDelay, subscription: this });
          return;
        }
        if (frame.type === 'unsubscribed') {
          // The gateway ended the stream (its store was deleted): the copy is stale. Reported as
          // over WebSocket, then retried with backoff; a store made again comes back as a reset.
          const error = { code: 'no_such_store', message: `the gateway ended the subscription (${frame.reason || 'unsubscribed'})` };
          source.close();
          this._source = null;
          this._client._emit('error', { ...error, subscription: this });
          this._emit('error', error);
          this._sseLost(generation, error);
          return;
        }
        this._onFrame(frame, bytes);
      };
      for (const name of ['snapshot', 'subscribed', 'changes', 'message', 'gap', 'reset', 'presence', 'draining', 'unsubscribed']) {
        source.addEventListener(name, onEvent);
      }
      // Not a frame: it only tells that the gateway answers, and at what interval.
      source.addEventListener('heartbeat', (event) => {
        if (generation === this._sseGeneration && this._sseHeartbeat) this._sseHeartbeat.heartbeat(event.data);
      });
      // An event named `error` carries data; the EventSource's own errors do not. EventSource
      // would retry by itself, but without backoff or `since`; the client takes it over.
      source.onerror = (event) => {
        if (generation !== this._sseGeneration) return;
        this._clearSseTimer();
        if (typeof event.data === 'string') {
          this._sseHeard();
          let frame = null;
          try { frame = JSON.parse(event.data); } catch { /* not JSON: ignore */ }
          if (isObject(frame)) this._onStreamError(frame);
          return;
        }
        source.close();
        this._source = null;
        if (opened) this._sseLost(generation);
        else this._askWhy(generation, url);
      };
    });
  }

  /**
   * The stream failed before it opened. EventSource cannot tell a refusal from a network failure,
   * so the same URL is asked again with fetch: a 4xx is the gateway refusing the subscription,
   * reported with its code as over WebSocket and retried (or `failed`) alike; anything else is a
   * failure to reach it, retried with backoff.
   */
  _askWhy(generation, url) {
    if (typeof fetch !== 'function') {
      this._sseLost(generation);
      return;
    }
    const abort = typeof AbortController === 'function' ? new AbortController() : null;
    fetch(url, { headers: { Accept: 'text/event-stream' }, cache: 'no-store', signal: abort ? abort.signal : undefined })
      .then(async (response) => {
        if (response.status < 400 || response.status >= 500) {
          if (abort) abort.abort(); // a stream after all, or a gateway in trouble: not a refusal
          return null;
        }
        let body = null;
        try { body = await response.json(); } catch { /* not JSON */ }
        return this._refusal(response.status, isObject(body) ? body : {});
      })
      .catch(() => null)
      .then((error) => {
        if (generation !== this._sseGeneration || this._closed) return;
        if (error === null) {
          this._sseLost(generation);
          return;
        }
        this._client._emit('error', { ...error, subscription: this });
        this._refused(error);
      });
  }

  /** An event stream's refusal (its HTTP status and JSON body), with the WebSocket's code for it. */
  _refusal(status, body) {
    // A URL longer than the gateway reads (many model ids): no retry can cure it.
    if (status === 414 || status === 431) {
      return { code: 'bad_message', message: `the event stream's URL is too long for the gateway (${status}): list fewer or shorter ` +
        'model ids and paths, or use the WebSocket', status };
    }
    const codes = { 400: this.kind === 'topic' ? 'invalid_topic' : 'bad_message', 401: 'unauthorized', 403: 'forbidden',
      404: this.kind === 'store' ? 'no_such_store' : 'not_found', 429: 'too_many_subscriptions' };
    const code = codes[status] || String(body.error || `http_${status}`);
    return { code, message: String(body.detail || body.error || `the gateway answered ${status}`), status };
  }

  /**
   * The stream did not open within the client's `connectTimeoutMs` (a gateway that takes the
   * connection and never answers, a token that never comes): the attempt has failed.
   */
  _sseTimedOut(generation) {
    this._sseTimer = null;
    if (generation !== this._sseGeneration || this._closed) return;
    if (this._source) this._source.close();
    this._source = null;
    this._sseLost(generation);
    this._sseGeneration += 1; // what the attempt still has under way (its token) is ignored
  }

  _clearSseTimer() {
    if (this._sseTimer !== null) clearTimeout(this._sseTimer);
    this._sseTimer = null;
  }

  /** The stream opened: with `heartbeatMs` above 0 its silence is watched (client/sse-heartbeat.js). */
  _watchSse(generation) {
    if (generation !== this._sseGeneration || this._closed) return;
    this._stopSseHeartbeat();
    const { _heartbeatMs: heartbeatMs, _heartbeatTimeoutMs: timeoutMs } = this._client;
    if (heartbeatMs > 0) this._sseHeartbeat = new SseHeartbeat(heartbeatMs, timeoutMs, (ms) => this._sseSilent(generation, ms));
  }

  _sseHeard() {
    if (this._sseHeartbeat) this._sseHeartbeat.heard();
  }

  _stopSseHeartbeat() {
    if (this._sseHeartbeat) this._sseHeartbeat.stop();
    this._sseHeartbeat = null;
  }

  /**
   * Nothing came on the open stream for `ms`, heartbeats included: the gateway stopped answering.
   * The stream is lost as when it fails, and resumes where it stopped after the backoff.
   */
  _sseSilent(generation, ms) {
    if (generation !== this._sseGeneration || this._closed) return;
    if (this._source) this._source.close();
    this._source = null;
    this._sseLost(generation, { code: 'unavailable', message: `no heartbeat nor any other event on the stream within ${ms} ms` });
    this._sseGeneration += 1; // the stream's own error, whenever it comes, is not a second loss
  }

  _stopSse() {
    this._clearSseTimer();
    this._stopSseHeartbeat();
    this._sseGeneration += 1;
    if (this._source) this._source.close();
    this._source = null;
  }

  _sseLost(generation, error = undefined) {
    if (generation !== this._sseGeneration || this._closed) return;
    this._clearSseTimer();
    this._stopSseHeartbeat();
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
    this._setStatus('reconnecting', { retryAt: Date.now() + delay, error });
  }

  /** An `error` event on this subscription's SSE stream (a token that ran out, say). */
  _onStreamError(frame) {
    const error = { code: String(frame.code || 'error'), message: String(frame.message || frame.code || 'error') };
    this._emit('error', error);
    this._client._emit('error', { ...error, subscription: this });
  }

  /**
   * `?name=value&…` from [name, value or list of values] pairs, `heartbeat=event` unless the
   * heartbeat is off (client/sse-heartbeat.js), and the token if any.
   */
  _sseQuery(params, token) {
    if (this._client._heartbeatMs > 0) params.push(['heartbeat', 'event']);
    if (token) params.push(['token', token]);
    const query = params.map(([name, value]) => `${name}=${Array.isArray(value)
      ? value.map(encodeURIComponent).join(',') : encodeURIComponent(value)}`).join('&');
    return query ? `?${query}` : '';
  }
}
