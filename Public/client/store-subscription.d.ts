// StoreSubscription (store-subscription.js): a live local copy of one store, and its events.

import type { GatewayError } from './errors.js';
import type { JSONObject, JSONValue } from './json.js';
import type { SavedStore, StoreFilterOptions } from './options.js';
import { Subscription } from './subscription.js';
import type { PresenceEvent, SubscriptionStatusEvent } from './subscription.js';

export {}; // only the names marked `export` below are exported

/** A change's kind (docs/PROTOCOL.md). */
export type ChangeKind = 'created' | 'updated' | 'deleted';

/** The store's `snapshot` event: the copy was replaced (first, or after a reset). */
export interface SnapshotEvent {
  version: number;
  epoch: string | null;
  /** `true` when it replaced a copy (a reset after a reconnection or a stale resume). */
  reset: boolean;
  /**
   * The new copy, as of this snapshot: a Map of the listener's own, whose values later changes
   * never alter (`sub.models` follows them).
   */
  models: ReadonlyMap<string, JSONObject>;
}

/**
 * The store's `change` event, for each change, after it was applied. Its values stay as they
 * were given: later changes replace what the copy holds, never change it in place.
 */
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

/**
 * A live local copy of one store, projected by `models` and `paths` when given: the snapshot,
 * then every frame applied in version order. Made by `client.subscribeStore()`.
 */
export class StoreSubscription extends Subscription<StoreEventMap> {
  private constructor();
  readonly kind: 'store';
  /** The options, validated (without `since`, `epoch` and `state`). */
  readonly options: Readonly<StoreFilterOptions>;
  /** Model id → value, as last applied. Read it; do not change it (a model taken from it stays as it was). */
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
