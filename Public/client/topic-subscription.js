// TopicSubscription: the messages of one topic, in sequence order.

import { Subscription } from './subscription.js';

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

  /**
   * What to keep to resume later: `{since, epoch}`, plain JSON (`epoch` once the gateway named
   * it), or null while there is no position yet (a subscription from now on, not answered yet). Give it back: `subscribeTopic(name, {...options, ...saved})`; the gateway then
   * sends the messages after `since`, or, when `since` belongs to another life of the topic, says
   * `reset` (and the new life's messages are taken from its start).
   */
  saved() {
    if (this._seq === null) return null;
    return this._epoch === null ? { since: this._seq } : { since: this._seq, epoch: this._epoch };
  }

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
