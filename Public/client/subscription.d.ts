// Subscription (subscription.js): what a store and a topic subscription share; statuses and presence.

import { Emitter } from './emitter.js';
import type { GatewayError } from './errors.js';
import type { JSONObject } from './json.js';
import type { Transport } from './options.js';

export {}; // only the names marked `export` below are exported

/** A subscription's state (`sub.status`). */
export type SubscriptionStatus = 'connecting' | 'live' | 'reconnecting' | 'offline' | 'failed' | 'closed';

// ---- Presence ---------------------------------------------------------------------------------

/** One member of a topic's or a store's presence (docs/PROTOCOL.md, Presence). */
export interface PresenceMember {
  /** The connection's id, 16 hex digits; one per connection, for all its subscriptions. */
  client: string;
  /** The subscription token's `sub` claim; `''` without a token. */
  user: string;
  /** The token's `info` claim, as written; absent without one. */
  info?: JSONObject;
  /** When this subscription began, in microseconds since the Unix epoch. */
  joinedAt: number;
}

/** A member that left: its client id and user. */
export interface PresenceLeave {
  client: string;
  user: string;
}

/** Who subscribes (`sub.presence`), kept from the gateway's presence frames. */
export interface PresenceState {
  /** Client id → member. Empty when `countsOnly`. */
  readonly members: ReadonlyMap<string, PresenceMember>;
  /** How many members there are. */
  readonly clients: number;
  /** How many distinct non-empty users there are. */
  readonly users: number;
  /** Past the gateway's `--presence-max-members` only the counts are kept, and no members. */
  readonly countsOnly: boolean;
}

/** The `presence` event: the state after a presence frame, and what that frame changed. */
export interface PresenceEvent extends PresenceState {
  /** The members that joined (or were replaced) in this frame. */
  joins: PresenceMember[];
  /** The members that left in this frame. */
  leaves: PresenceLeave[];
  /** `true` when the frame replaced the whole list (or dropped it for counts only). */
  whole: boolean;
}

/** A subscription's `status` event. */
export interface SubscriptionStatusEvent {
  status: SubscriptionStatus;
  /** When the next attempt is due (`Date.now()` time), while `'reconnecting'`; otherwise null. */
  retryAt: number | null;
  /** The refusal behind a `'reconnecting'` or `'failed'` status, if any. */
  error: GatewayError | null;
  /** The client's transport. */
  transport: Transport;
}

/** What a store and a topic subscription have in common (not exported by the module). */
export declare abstract class Subscription<Events> extends Emitter<Events> {
  protected constructor();
  /** `'store'` or `'topic'`. */
  readonly kind: 'store' | 'topic';
  /** The store's or the topic's name. */
  readonly name: string;
  /** Frames received so far. */
  readonly frames: number;
  /** Their size: the UTF-8 length of each frame's JSON. */
  readonly bytes: number;
  /** `'connecting'`, `'live'`, `'reconnecting'`, `'offline'`, `'failed'` or `'closed'`. */
  readonly status: SubscriptionStatus;
  /** Whether `unsubscribe()` (or the client's `close()`) ended it. */
  readonly closed: boolean;
  /**
   * With `presence: true`, who subscribes: `{members, clients, users, countsOnly}`, `members` a
   * `Map` of client id to `{client, user, info, joinedAt}`. Past the gateway's member limit only
   * the counts are kept (`countsOnly`, an empty map).
   */
  readonly presence: PresenceState;
  /** Stops it; its last event is `status` `'closed'`. */
  unsubscribe(): void;
}
