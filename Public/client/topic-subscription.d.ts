// TopicSubscription (topic-subscription.js): the messages of one topic, and its events.

import type { GatewayError } from './errors.js';
import type { JSONValue } from './json.js';
import type { SavedTopic } from './options.js';
import { Subscription } from './subscription.js';
import type { PresenceEvent, SubscriptionStatusEvent } from './subscription.js';

export {}; // only the names marked `export` below are exported

/** The topic's `message` event. */
export interface TopicMessageEvent {
  /** The message's sequence number. */
  seq: number;
  /** What was published. */
  data: JSONValue;
  /** When it was published, in microseconds since the Unix epoch. */
  publishedAt: number;
}

/** The topic's `gap` event: messages `from` to `to` left the history before they could be delivered. */
export interface GapEvent {
  from: number;
  to: number;
}

/** The topic's `reset` event: the topic's numbers started again (a new epoch). */
export interface TopicResetEvent {
  /** The new sequence number. */
  seq: number;
  /** The sequence number held before. */
  previous: number | null;
}

/** The topic's `frame` event, after each frame. */
export type TopicFrameEvent =
  | { type: 'subscribed'; seq: number; bytes: number; receivedAt: number }
  | { type: 'message'; seq: number; bytes: number; publishedAt: number; receivedAt: number }
  | { type: 'reset'; seq: number; bytes: number; receivedAt: number }
  | { type: 'gap'; seq: number; bytes: number; receivedAt: number };

/** A topic subscription's events and the value each listener receives. */
export interface TopicEventMap {
  message: TopicMessageEvent;
  gap: GapEvent;
  reset: TopicResetEvent;
  frame: TopicFrameEvent;
  presence: PresenceEvent;
  status: SubscriptionStatusEvent;
  /** The gateway refused the subscription. */
  error: GatewayError;
}

/** The messages of one topic, in sequence order, each once. Made by `client.subscribeTopic()`. */
export class TopicSubscription extends Subscription<TopicEventMap> {
  private constructor();
  readonly kind: 'topic';
  /** The last sequence number delivered (or skipped by a gap), or null before the subscription answers. */
  readonly seq: number | null;
  /** The life of the topic `seq` belongs to, or null before the subscription answers. */
  readonly epoch: string | null;
  /**
   * What to keep to resume later: `{since, epoch}`, plain JSON (`epoch` once the gateway named
   * it), or null while there is no position yet (a subscription from now on, not answered yet). Give it back with the same options: `subscribeTopic(name, {...options, ...saved})`;
   * the gateway then sends the messages after `since`, or says `reset` when `since` belongs to
   * another life of the topic.
   */
  saved(): SavedTopic | null;
}
