// The options of a client, of its subscriptions, of publish() and of commit(); options.js checks them.

import type { JSONValue } from './json.js';

export {}; // only the names marked `export` below are exported

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
   * missing or fails `fallbackAfter` times without ever opening while the gateway answers plain
   * HTTP (an upgrade refused on the way). An address that answers nothing is tried again over
   * WebSocket.
   */
  transport?: TransportOption;
  /**
   * The first reconnection delay in milliseconds, doubled with each failure in a row. Default 500.
   * Each delay option is a number from 1 to 2147483647; anything else throws a `TypeError`.
   */
  backoffBaseMs?: number;
  /** The longest reconnection delay in milliseconds. Default 15000. */
  backoffMaxMs?: number;
  /**
   * WebSocket attempts that fail before ever opening while the gateway answers HTTP, after which
   * `'auto'` moves to SSE: a whole number of at least 1, or `Infinity` (never). Default 3.
   */
  fallbackAfter?: number;
  /**
   * How long a connection attempt may take, the token included (a WebSocket until it opens, an
   * event stream until the gateway answers it); past it the attempt has failed and the backoff
   * goes on. Default 10000.
   */
  connectTimeoutMs?: number;
  /**
   * How long `commit()`, `rpc()` and `publish()` wait for their answer (a call made while the
   * WebSocket is not open waits for it within that time too); past it they reject with
   * `unavailable`. Keep it above the gateway's `--hook-timeout` when hooks answer calls. Default 30000.
   */
  requestTimeoutMs?: number;
  /**
   * Over WebSocket, after this many milliseconds with no frame received the client sends a
   * `ping`; a gateway that then sends nothing within `heartbeatTimeoutMs` (a frozen process, a
   * dead network path: the socket stays open, and a browser sees no WebSocket pings) is taken
   * as lost, as a closed socket is (a `close` with code 0, then the backoff). A connection that
   * keeps receiving sends none. Over SSE each stream asks for `heartbeat` events instead, and
   * one silent for their interval (this, until the first names it) and `heartbeatTimeoutMs` is
   * lost and resumed. `0` turns it off; otherwise a delay as the others. Default 20000.
   */
  heartbeatMs?: number;
  /**
   * How long the client waits for any frame after its `ping` (over SSE: past the heartbeat
   * interval). Keep it above the gateway's `--hook-timeout` where hooks answer RPCs or commits:
   * a connection with 16 RPCs under way reads nothing else, its `ping` included, until one is
   * answered. Default 10000.
   */
  heartbeatTimeoutMs?: number;
  /** The WebSocket constructor to use (default: `globalThis.WebSocket`), called as `new WebSocket(url, 'receptionist.v1')`. */
  WebSocket?: new (url: string, protocols?: string | string[]) => WebSocket;
  /** The EventSource constructor to use (default: `globalThis.EventSource`), called as `new EventSource(url)`. */
  EventSource?: new (url: string) => EventSource;
}
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

/**
 * What `TopicSubscription.saved()` gives: the position reached, plain JSON. Give it back with the
 * same options to resume: `client.subscribeTopic(name, { ...options, ...saved })`.
 */
export interface SavedTopic {
  /** The last sequence number delivered (or skipped by a gap). */
  since: number;
  /** The life of the topic `since` belongs to; absent when the gateway named none. */
  epoch?: string;
}

/** The options of `subscribeTopic`. Store options on a topic throw. */
export interface TopicOptions {
  /** Deliver the messages after this sequence number (`0`: from the start of the history). Default: from now on. */
  since?: number;
  /**
   * The life of the topic `since` belongs to (`saved().epoch`, `sub.epoch`): a `since` of another
   * life is answered with a `reset`, and the new life's messages are taken from its start. Goes
   * with `since`; at most 64 bytes. `null` is none.
   */
  epoch?: string | null;
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

// ---- What options.js exports (not exported by the module) ---------------------------------

/** The store options a `subscribe` carries, and a topic refuses. */
export declare const STORE_OPTION_KEYS: string[];

/** Checks the client's delays and `fallbackAfter`; throws a `TypeError` for a bad one. */
export declare function checkClientTimings(given: Record<string, number>): void;

/** Checks a change set's shape as the gateway reads it; throws a `TypeError` for a malformed one. */
export declare function validateChanges(changes: readonly ChangeOperation[]): void;

/** The gateway's base URLs, from `url` (default: the page's origin); throws a `TypeError` for a bad one. */
export declare function resolveBase(url: string | URL | undefined): { http: string; ws: string };

/** The store options checked as the gateway checks them; throws a `TypeError` for a bad one. */
export declare function validateStoreOptions(options: StoreOptions): StoreOptions;
