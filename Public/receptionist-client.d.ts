// Type declarations for receptionist-client.js, the browser client of the Receptionist gateway.
// docs/CLIENT.md documents the API; docs/PROTOCOL.md the messages behind it. Every name here is
// one that receptionist-client.js defines: Tests/e2e/test_typescript.py type-checks an example
// page against this file (Tests/typescript/example.ts).

// Only the names exported below exist: the module's private classes (its event emitter and the
// subscriptions' common base) are declared without `export`, and `Subscription` is exported as a
// type only, since the module does not export it as a value.
export {};

// ---- JSON -------------------------------------------------------------------------------------

/** A JSON value, as `JSON.parse` gives it. */
export type JSONValue = string | number | boolean | null | JSONValue[] | JSONObject;

/** A JSON object. A store's model is one (docs/CONCEPTS.md). */
export interface JSONObject {
  [key: string]: JSONValue;
}

// ---- Limits ------------------------------------------------------------------------------------

/**
 * The limits a subscription's options keep: the gateway's own (docs/PROTOCOL.md, "Limits"). An
 * option past one throws a `TypeError` before anything is sent.
 */
export declare const LIMITS: Readonly<{
  maxModels: number;
  maxPaths: number;
  minRate: number;
  maxRate: number;
  maxEpochBytes: number;
  maxSince: number;
  maxRefBytes: number;
}>;

// ---- The client's options ---------------------------------------------------------------------

/** What `transport` may ask for: WebSocket, SSE, or WebSocket with SSE as the fallback. */
export type TransportOption = 'auto' | 'websocket' | 'sse';

/** The transport a client uses: `'auto'` resolves to one of these. */
export type Transport = 'websocket' | 'sse';

/**
 * How the token goes over WebSocket: `'message'`, an `auth` message first on every WebSocket;
 * `'query'`, `/ws?token=…`. SSE always uses `?token=`.
 */
export type TokenIn = 'message' | 'query';

/** A token, or none (`null`, `undefined` or `''` mean no token). */
export type TokenValue = string | null | undefined;

/**
 * A function that gives a token (or a promise of one). It is asked before every connection and,
 * over WebSocket with `tokenIn: 'message'`, again ahead of the token's expiry. A function that
 * throws or a promise that rejects is reported as an `error` event with code `token_unavailable`,
 * and the connection goes on without a token.
 */
export type TokenProvider = () => TokenValue | PromiseLike<TokenValue>;

/** Options of `new ReceptionistClient(options)`; each may be left out. */
export interface ReceptionistClientOptions {
  /**
   * The gateway: `https://gw.example.com`, `http://127.0.0.1:8080`, or a `ws:`/`wss:` URL; a
   * path is kept as a prefix. Default: the page's origin (required outside a page).
   */
  url?: string | URL;
  /**
   * A subscription token (docs/SECURITY.md), or a function that returns one (or a promise of one),
   * asked before every connection and, over WebSocket with `tokenIn: 'message'`, again ahead of
   * the token's expiry (a quarter of its time left, at most a minute before), the new one
   * presented on the open connection so it never reconnects for a token. Default: none.
   */
  token?: string | null | TokenProvider;
  /** `'message'` (the default): an `auth` message first on every WebSocket; `'query'`: `/ws?token=…`. */
  tokenIn?: TokenIn;
  /**
   * `'websocket'`, `'sse'`, or `'auto'` (the default): WebSocket, and SSE when WebSocket is
   * missing or fails `fallbackAfter` times in a row without ever opening.
   */
  transport?: TransportOption;
  /** The first reconnection delay, doubled with each failure in a row. Default 500. */
  backoffBaseMs?: number;
  /** The longest reconnection delay. Default 15000. */
  backoffMaxMs?: number;
  /** WebSocket attempts in a row that fail before ever opening, after which `'auto'` moves to SSE. Default 3. */
  fallbackAfter?: number;
  /** The WebSocket constructor to use (default: `globalThis.WebSocket`), called as `new WebSocket(url, 'receptionist.v1')`. */
  WebSocket?: new (url: string, protocols?: string | string[]) => WebSocket;
  /** The EventSource constructor to use (default: `globalThis.EventSource`), called as `new EventSource(url)`. */
  EventSource?: new (url: string) => EventSource;
}

// ---- Statuses ---------------------------------------------------------------------------------

/** The client's WebSocket state (`client.status`). */
export type ClientStatus = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'offline' | 'closed';

/** A subscription's state (`sub.status`). */
export type SubscriptionStatus = 'connecting' | 'live' | 'reconnecting' | 'offline' | 'failed' | 'closed';

// ---- Subscription options ---------------------------------------------------------------------

/**
 * The options of a store subscription that select what is sent (docs/PROTOCOL.md, "Subscription
 * options"); each may be left out. A bad one throws a `TypeError` at once, naming the field, on
 * either transport; nothing is sent.
 */
export interface StoreFilterOptions {
  /** Model ids to follow, a non-empty list; an id ending in `*` is a prefix (`'tile-1*'`). */
  models?: readonly string[];
  /** Key-path prefixes inside a model, a non-empty list (`'color'`, `'style.border'`). */
  paths?: readonly string[];
  /**
   * At most this many frames a second (`0.01 ≤ maxRate ≤ 1000`, the gateway's bounds); changes in
   * between are coalesced.
   */
  maxRate?: number;
  /** `true`: each change carries its previous value from the gateway. */
  old?: boolean;
  /** `true`: also keep who else subscribes (`sub.presence`, the `presence` event). */
  presence?: boolean;
}

/**
 * What `StoreSubscription.saved()` gives: a copy kept from before (its version, its epoch and its
 * models), plain JSON. Give it back with the same options to resume:
 * `client.subscribeStore(name, { ...options, ...saved })`.
 */
export interface SavedStore {
  /** The version the copy is at. */
  since: number;
  /** The life of the store that version belongs to; absent when the gateway named none. */
  epoch?: string;
  /** The models at `since`: `{id: value}`. */
  state: Record<string, unknown>;
}

/**
 * The options of `subscribeStore`: the filter options, and `since`, `epoch` and `state` to resume
 * a copy kept from before (what `saved()` gives; spread it in: `{ paths: ['color'], ...saved }`).
 * `since` needs `state`, and `epoch` and `state` go with `since`: otherwise the call throws a
 * `TypeError`. (The declarations leave that to the check at run time, so that spreading a
 * `SavedStore | null`, as in `{ ...options, ...(kept ?? {}) }`, type-checks.)
 */
export interface StoreOptions extends StoreFilterOptions {
  /** Resume from this version (a non-negative integer): `saved().since`. Needs `state`. */
  since?: number;
  /** The life of the store `since` belongs to: `saved().epoch`. A version from another life is answered with a reset snapshot. */
  epoch?: string;
  /** The models at `since`, `{id: value}`: `saved().state`. */
  state?: Record<string, unknown>;
}

/** The options of `subscribeTopic`. Store options on a topic throw. */
export interface TopicOptions {
  /** Deliver the messages after this sequence number (`0`: from the start of the history). Default: from now on. */
  since?: number;
  /** `true`: also keep who else subscribes (`sub.presence`, the `presence` event). */
  presence?: boolean;
  models?: never;
  paths?: never;
  maxRate?: never;
  old?: never;
}

/** The options of `publish`. */
export interface PublishOptions {
  /** With it, a retry after a lost answer is answered, not published twice (`Idempotency-Key`). */
  idempotencyKey?: string;
}

/**
 * What `publish()` rejects with when the gateway refuses or cannot answer: an `Error` whose `code`
 * and `status` are the gateway's (`forbidden`, `unauthorized`, `too_many_requests`, …; `code` is
 * `'unavailable'` when the answer holds no error code). A bad topic name or a `data` that is not
 * JSON rejects with a `TypeError` instead, and so does a request that never got an answer (the
 * one `fetch` gives).
 */
export interface PublishError extends Error {
  /** The gateway's error code (`forbidden`, `too_many_requests`, …), or `'unavailable'`. */
  code: string;
  /** The HTTP status of the answer. */
  status: number;
}

/** One operation of a change set (`POST /api/stores/{store}/changes`, or `commit()`). */
export type ChangeOperation =
  | { op: 'put'; model: string; value: { [key: string]: JSONValue } }
  | { op: 'patch'; model: string; value: { [key: string]: JSONValue } }
  | { op: 'set'; model: string; path: string; value: JSONValue }
  | { op: 'delete'; model: string };

/** The conditions of a `commit()`: nothing is applied unless they hold. */
export interface CommitOptions {
  /** The store must be at this version. */
  ifVersion?: number;
  /** Each model must be at its entity tag (`"17"`, or `"*"`: it exists). */
  ifMatch?: { [model: string]: string | number };
}

/**
 * What `commit()` rejects with: an `Error` whose `code` is the gateway's (`forbidden`,
 * `unauthorized`, `precondition_failed`, `no_such_store`, `bad_message`, `rate_limited`), or
 * `'unavailable'` when the backend's hook did not answer or the connection is not open or closed
 * before the answer (the outcome is then unknown). `version` is the store's version, for
 * `precondition_failed`.
 */
export interface CommitError extends Error {
  code: string;
  version?: number;
}

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

// ---- Events -----------------------------------------------------------------------------------

/** An error the gateway answered: its code (`no_such_store`, `forbidden`, …) and message. */
export interface GatewayError {
  code: string;
  message: string;
}

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

/** The client's `transport` event, when `'auto'` moves to SSE. */
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

/** A change's kind (docs/PROTOCOL.md). */
export type ChangeKind = 'created' | 'updated' | 'deleted';

/** The store's `snapshot` event: the copy was replaced (first, or after a reset). */
export interface SnapshotEvent {
  version: number;
  epoch: string | null;
  /** `true` when it replaced a copy (a reset after a reconnection or a stale resume). */
  reset: boolean;
  /** The new copy: `sub.models`. */
  models: ReadonlyMap<string, JSONObject>;
}

/** The store's `change` event, for each change, after it was applied. */
export interface ChangeEvent {
  /** The model's id. */
  model: string;
  /** The key path inside the model; `''` is the whole model. */
  path: string;
  kind: ChangeKind;
  /** The new value; `null` when deleted. */
  value: JSONValue;
  /** The gateway's with `old: true`, otherwise the value the copy held (undefined when none). */
  old: JSONValue | undefined;
}

interface StoreFrameBase {
  /** The store's name. */
  store: string;
  /** The version the copy is at after this frame. */
  version: number;
  /** The UTF-8 length of the frame's JSON. */
  bytes: number;
  /** How many changes were applied from this frame (0 but for `changes` frames). */
  changes: number;
  /** `Date.now()` when the frame arrived. */
  receivedAt: number;
}

/** The store's `frame` event after a snapshot. */
export interface StoreSnapshotFrame extends StoreFrameBase {
  type: 'snapshot';
  reset: boolean;
}

/** The store's `frame` event after a resume was accepted. */
export interface StoreSubscribedFrame extends StoreFrameBase {
  type: 'subscribed';
}

/** The store's `frame` event after a change set (or several, coalesced). */
export interface StoreChangesFrame extends StoreFrameBase {
  type: 'changes';
  /** `true` when the frame folds several change sets together. */
  conflated: boolean;
  /** A coalesced frame holds the change sets after this version up to `version`. */
  from?: number;
  /** The gateway's wall-clock time of the last change set it holds, in microseconds. */
  committedAt: number;
  /** The gateway's wall-clock time of the first change set it holds, in microseconds. */
  firstCommittedAt: number;
}

/** The store's `frame` event, after each frame. */
export type StoreFrameEvent = StoreSnapshotFrame | StoreSubscribedFrame | StoreChangesFrame;

/** The store's `resumed` event: a resume was accepted; the missed change sets follow. */
export interface ResumedEvent {
  version: number;
  resumed: boolean;
}

/** A store subscription's events and the value each listener receives. */
export interface StoreEventMap {
  snapshot: SnapshotEvent;
  change: ChangeEvent;
  frame: StoreFrameEvent;
  resumed: ResumedEvent;
  presence: PresenceEvent;
  status: SubscriptionStatusEvent;
  /** The gateway refused the subscription. */
  error: GatewayError;
}

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

/** An event listener: called with the event's value, `this` being the emitter. */
export type Listener<Target, Value> = (this: Target, value: Value) => void;

// ---- Classes ----------------------------------------------------------------------------------

/** The module's event emitter (not exported by it). A listener that throws is reported (`reportError`). */
declare class Emitter<Events> {
  protected constructor();
  /** Calls `listener(value)` on each event `event`; returns a function that removes it. */
  on<K extends keyof Events>(event: K, listener: Listener<this, Events[K]>): () => void;
  /** Calls `listener` on the next event `event` only; returns a function that removes it. */
  once<K extends keyof Events>(event: K, listener: Listener<this, Events[K]>): () => void;
  /** Removes a listener added with `on`. */
  off<K extends keyof Events>(event: K, listener: Listener<this, Events[K]>): void;
}

/** What a store and a topic subscription have in common (not exported by the module). */
declare abstract class Subscription<Events> extends Emitter<Events> {
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
export type { Subscription };

/** A store or a topic subscription. */
export type AnySubscription = StoreSubscription | TopicSubscription;

/**
 * A live local copy of one store, projected by `models` and `paths` when given: the snapshot,
 * then every frame applied in version order. Made by `client.subscribeStore()`.
 */
export class StoreSubscription extends Subscription<StoreEventMap> {
  private constructor();
  readonly kind: 'store';
  /** The options, validated (without `since`, `epoch` and `state`). */
  readonly options: Readonly<StoreFilterOptions>;
  /** Model id → value, as last applied. Read it; do not change it. */
  readonly models: ReadonlyMap<string, JSONObject>;
  /** The version the copy is at (`null` before the first snapshot). */
  readonly version: number | null;
  /** The life of the store that version belongs to (`null` until the gateway names it). */
  readonly epoch: string | null;
  /** One model, or `undefined`. */
  get(id: string): JSONObject | undefined;
  /** `{id: value}`, so `JSON.stringify(sub)` gives the state. */
  toJSON(): Record<string, JSONObject>;
  /**
   * What to keep to resume after a reload: `{since, epoch, state}`, plain JSON, or null before
   * the first snapshot. Give it back with the same options: `subscribeStore(name, {...options,
   * ...saved})`; the gateway then sends only the change sets after `since` (or a reset snapshot
   * when it no longer has them, or the store's epoch changed).
   */
  saved(): SavedStore | null;
}

/** The messages of one topic, in sequence order, each once. Made by `client.subscribeTopic()`. */
export class TopicSubscription extends Subscription<TopicEventMap> {
  private constructor();
  readonly kind: 'topic';
  /** The last sequence number delivered (or skipped by a gap), or null before the subscription answers. */
  readonly seq: number | null;
  /** The life of the topic `seq` belongs to, or null before the subscription answers. */
  readonly epoch: string | null;
}

/**
 * A connection to one gateway: one WebSocket (subprotocol `receptionist.v1`) for all of its
 * subscriptions, at most one per store and one per topic, with reconnection and resumption; or,
 * over SSE, an `EventSource` per subscription.
 */
export class ReceptionistClient extends Emitter<ClientEventMap> {
  /** Throws a `TypeError` for an unknown `transport` or `tokenIn`, a bad `url`, or a transport that is missing. */
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
   * Follows a topic: every message from now on, or after `since` when given. Throws a
   * `TypeError` for a bad option (store options included), and an `Error` when this client
   * already subscribes to the topic or is closed.
   */
  subscribeTopic(name: string, options?: TopicOptions): TopicSubscription;
  /**
   * Publishes `data` to `topic` over HTTP (`POST /api/topics/{topic}/messages`) whatever the
   * transport, with the client's token as `Authorization: Bearer` when it has one (its `publish`
   * claim must name the topic). Resolves with the message's sequence number; rejects with a
   * `PublishError` (`code`, `status`) when the gateway refuses.
   */
  publish(topic: string, data: JSONValue, options?: PublishOptions): Promise<number>;
  /**
   * Commits a change set to `store` over the open WebSocket, allowed by the connection's `write`
   * grant or the backend's write hook. Resolves with the store's version after it; rejects with a
   * `CommitError`. Throws a `TypeError` for an empty or malformed change set.
   */
  commit(store: string, changes: ChangeOperation[], options?: CommitOptions): Promise<number>;
  /**
   * Calls the backend's RPC hook over the open WebSocket (`docs/HOOKS.md`). Resolves with its
   * answer; rejects with an `Error` whose `code` is `unavailable`, `forbidden`, `rpc_failed`,
   * `unauthorized` or `rate_limited`.
   */
  rpc(method: string, data?: JSONValue): Promise<JSONValue>;
  /** Closes every subscription and the connection. */
  close(): void;
}

export default ReceptionistClient;
