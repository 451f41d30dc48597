// ReceptionistClient (receptionist-client.js): a connection to one gateway, and its events.

import { Emitter } from './emitter.js';
import type { GatewayError } from './errors.js';
import type { JSONValue } from './json.js';
import type {
  ChangeOperation, CommitOptions, PublishOptions, ReceptionistClientOptions, StoreOptions, TopicOptions, Transport,
} from './options.js';
import type { StoreSubscription } from './store-subscription.js';
import type { TopicSubscription } from './topic-subscription.js';

export {}; // only the names marked `export` below are exported

/** The client's WebSocket state (`client.status`). */
export type ClientStatus = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'offline' | 'closed';

/** The client's `status` event. */
export interface ClientStatusEvent {
  status: ClientStatus;
  /** When the next connection attempt is due (`Date.now()` time), while `'reconnecting'`; otherwise null. */
  retryAt: number | null;
  /** The close code of the WebSocket that ended, while `'reconnecting'`; otherwise 0. */
  code: number;
}

/** The client's `close` event, when a WebSocket ends. */
export interface ClientCloseEvent {
  /** The WebSocket's close code (0 when it could not be made). */
  code: number;
  reason: string;
}

/** The client's `draining` event, when the gateway drains. */
export interface DrainingEvent {
  /** How long the client waits before it reconnects (at most 30 s). */
  reconnectAfterMs: number;
  /** Over SSE, the subscription whose stream was drained. */
  subscription?: AnySubscription;
}

/** The client's `transport` event, when `'auto'` moves to SSE (for good: the WebSocket's upgrade was refused while HTTP works). */
export interface TransportEvent {
  transport: 'sse';
}

/** The client's `authenticated` event, when the gateway accepted a token. */
export interface AuthenticatedEvent {
  /** When the token runs out, in seconds since the Unix epoch. */
  expiresAt: number;
}

/**
 * The client's `error` event: what the gateway refused (`no_such_store`, `forbidden`,
 * `token_expired`, …), and token problems (`token_unavailable`: the token function threw or its
 * promise rejected).
 */
export interface ClientErrorEvent extends GatewayError {
  /** The subscription refused, when the error answered one. */
  subscription?: AnySubscription;
}

/** The client's events and the value each listener receives. */
export interface ClientEventMap {
  status: ClientStatusEvent;
  close: ClientCloseEvent;
  draining: DrainingEvent;
  transport: TransportEvent;
  authenticated: AuthenticatedEvent;
  error: ClientErrorEvent;
}

/** A store or a topic subscription. */
export type AnySubscription = StoreSubscription | TopicSubscription;

/**
 * A connection to one gateway: one WebSocket (subprotocol `receptionist.v1`) for all of its
 * subscriptions, at most one per store and one per topic, with reconnection and resumption; or,
 * over SSE, an `EventSource` per subscription.
 */
export class ReceptionistClient extends Emitter<ClientEventMap> {
  /**
   * Throws a `TypeError` for an unknown `transport` or `tokenIn`, a bad `url`, a delay or
   * `fallbackAfter` that is not a number in its range, or a transport that is missing.
   */
  constructor(options?: ReceptionistClientOptions);
  /** `'websocket'` or `'sse'`, the transport in use (`'auto'` may move to `'sse'`). */
  readonly transport: Transport;
  /** The WebSocket's state: `'idle'`, `'connecting'`, `'open'`, `'reconnecting'`, `'offline'`, `'closed'`. */
  readonly status: ClientStatus;
  /** The subscriptions not closed (a new array each time). */
  readonly subscriptions: AnySubscription[];
  /**
   * Follows a store: a snapshot, then every change set (or the part the options select, at most
   * `maxRate` frames a second). Throws a `TypeError` for a bad option, and an `Error` when this
   * client already subscribes to the store or is closed.
   */
  subscribeStore(name: string, options?: StoreOptions): StoreSubscription;
  /**
   * Follows a topic: every message from now on, or after `since` when given, in the topic's life
   * `epoch` when given (`saved()` keeps both). Throws a `TypeError` for a bad option (store options
   * included, or an `epoch` without `since`), and an `Error` when this client already subscribes
   * to the topic or is closed.
   */
  subscribeTopic(name: string, options?: TopicOptions): TopicSubscription;
  /**
   * Publishes `data` to `topic` over HTTP (`POST /api/topics/{topic}/messages`) whatever the
   * transport, with the client's token as `Authorization: Bearer` when it has one (its `publish`
   * claim must name the topic). Resolves with the message's sequence number; rejects with a
   * `PublishError` (`code`, `status`) when the gateway refuses, or with `unavailable` and status 0
   * when no answer came within `requestTimeoutMs`.
   */
  publish(topic: string, data: JSONValue, options?: PublishOptions): Promise<number>;
  /**
   * Commits a change set to `store` over the WebSocket, allowed by the connection's `write` grant
   * or the backend's write hook. Made while the WebSocket is not open, it waits for it (and opens
   * it when the client has none), all within `requestTimeoutMs`. Resolves with the store's version
   * after it; rejects with a `CommitError`, at the latest after `requestTimeoutMs`. Throws a
   * `TypeError` for an empty or malformed change set (an unknown `op`, a bad model id, a `put`,
   * `patch` or `set` without a `value`, a `set` without a dotted `path`).
   */
  commit(store: string, changes: ChangeOperation[], options?: CommitOptions): Promise<number>;
  /**
   * Calls the backend's RPC hook over the WebSocket (`docs/HOOKS.md`), waiting for it as `commit`
   * does. Resolves with its answer; rejects with an `Error` whose `code` is `unavailable` (as for
   * `commit`: at the latest after `requestTimeoutMs`), `forbidden`, `rpc_failed`,
   * `unauthorized`, `rate_limited` or `bad_message` (at once, nothing sent, for data the gateway
   * could not read, as for `commit`).
   */
  rpc(method: string, data?: JSONValue): Promise<JSONValue>;
  /** Closes every subscription and the connection. */
  close(): void;
}
