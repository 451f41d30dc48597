// Checking what a client, a store subscription and a commit are given: the gateway's URL, the
// client's delays, store options, change sets.

import { MAX_TIMER_MS } from './defaults.js';
import { LIMITS } from './limits.js';
import { isObject } from './helpers.js';

const utf8Bytes = (text) => new TextEncoder().encode(text).length;

export const STORE_OPTION_KEYS = ['models', 'paths', 'maxRate', 'old'];

/** The gateway's base URLs, from `url` (http, https, ws or wss; default: the page's origin). */
export function resolveBase(url) {
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

/**
 * Checks the client's delays and counts (each was given, or is its default): a delay is a number
 * of milliseconds a timer can wait, at least 1; `fallbackAfter` a whole number, at least 1, or
 * Infinity (never). A NaN, null or 0 would make every delay nothing: a storm of attempts. Only
 * `heartbeatMs` may be 0, which turns the heartbeat off.
 */
export function checkClientTimings(given) {
  for (const [name, ms] of Object.entries(given)) {
    if (name === 'heartbeatMs' && ms === 0) continue;
    if (name === 'fallbackAfter') {
      if (ms !== Infinity && (!Number.isSafeInteger(ms) || ms < 1)) {
        throw new TypeError('ReceptionistClient: `fallbackAfter` must be a whole number of at least 1, or Infinity');
      }
    } else if (typeof ms !== 'number' || !(ms >= 1 && ms <= MAX_TIMER_MS)) {
      const off = name === 'heartbeatMs' ? ' (or 0: off)' : '';
      throw new TypeError(`ReceptionistClient: \`${name}\` must be a number of milliseconds from 1 to ${MAX_TIMER_MS}${off}`);
    }
  }
}

const OPS = ['put', 'patch', 'set', 'delete'];
const KEY_PATH = /^[^.]+(\.[^.]+)*$/;

/**
 * Checks a change set's shape as the gateway reads it (`POST /api/stores/{store}/changes`), so a
 * malformed one throws here, nothing sent: operations `put` and `patch` (with a `value`), `set`
 * (a dotted `path` and a `value`) and `delete`, each on a model id of 1 to 128 bytes, with no `/`
 * and no control character, and not `.` or `..`.
 */
export function validateChanges(changes) {
  if (!Array.isArray(changes) || changes.length === 0) throw new TypeError('commit: `changes` must be a non-empty array');
  changes.forEach((change, index) => {
    const bad = (what) => new TypeError(`commit: change ${index}: ${what}`);
    if (!isObject(change)) throw bad('not an object');
    if (!OPS.includes(change.op)) throw bad(`unknown op ${JSON.stringify(change.op)} (put, patch, set or delete)`);
    const model = change.model;
    if (typeof model !== 'string' || model === '' || model === '.' || model === '..' || /[/\u0000-\u001f]/.test(model) ||
        utf8Bytes(model) > 128) {
      throw bad(`bad model id ${JSON.stringify(model)} (1 to 128 bytes, no '/' and no control character, not '.' or '..')`);
    }
    // What a value holds is the gateway's to judge (its refusal carries the commit's ref).
    if (change.op !== 'delete' && change.value === undefined) throw bad(`${change.op} needs a \`value\``);
    if (change.op === 'set' && (typeof change.path !== 'string' || !KEY_PATH.test(change.path))) {
      throw bad('set needs a dotted `path` (`color`, `style.border`)');
    }
  });
}

/** Checks store options as the gateway does, so a bad one fails here, on either transport. */
export function validateStoreOptions(options) {
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
