// The viewer's history scrubber: a range under the tiles spanning the versions the gateway still
// keeps, from the oldest readable one to the live version. Moving it back pins the live view to
// the store as it was at that version (GET /api/stores/{store}?at=N) and marks the tiles whose
// model differs from the live one; the subscription keeps applying frames to the live models
// meanwhile. "Live" (or Escape on the range) shows the live models again.
//
// The oldest readable version is what the gateway answers for version 0: the store at 0 while it
// still keeps everything, or a 410 naming the oldest it keeps. It moves on as the store commits, so
// it is asked again when a scrub starts, when the range is touched, and whenever a read of the past
// answers 410. Reads of the past are throttled and serialized: at most one is in flight, and when
// it ends only the newest position asked for meanwhile is read. A version's snapshot never
// changes (within an epoch), so a few recent ones are kept and scrubbing over them again is free.

const SCRUB_THROTTLE_MS = 60;
const OLDEST_REFRESH_MS = 1000;
const CACHED_SNAPSHOTS = 16;

/** Deep equality of two JSON values (object key order does not matter). */
export function sameValue(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((item, i) => sameValue(item, b[i]));
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.prototype.hasOwnProperty.call(b, key) && sameValue(a[key], b[key]));
}

/**
 * Wires the scrubber's elements (#history…) to `view`, the live TileView.
 * `store()` and `epoch()` name the store shown and its live epoch; `showToast(text)` reports errors;
 * `token`, when the page has one, goes with every read (`Authorization: Bearer`), as the page's
 * other calls to the API do.
 * Call `livePainted()` after each paint of the live view and `reset()` when the store changes.
 */
export function createHistory({ view, store, epoch, showToast, token }) {
  const $ = (id) => document.getElementById(id);
  const el = {
    root: $('history'), range: $('history-range'), label: $('history-label'),
    changed: $('history-changed'), live: $('history-live'), min: $('history-min'), max: $('history-max'),
  };
  const s = {
    mode: 'live', // 'live', or 'past' from the first move of the range until Live
    epoch: undefined, // the live epoch the range and the cache belong to; undefined before a paint
    oldest: null, // the oldest readable version, as last heard
    shown: null, // the version the pinned tiles show, or null
    wanted: null, // a position not read yet
    inFlight: false,
    timer: null,
    generation: 0, // moves on at Live and at a store change, so late answers are dropped
    life: 0, // moves on at a store or epoch change, so a late oldest version is dropped
    oldestAskedAt: -Infinity,
    oldestInFlight: false,
    dragging: false, // a pointer holds the thumb: the range's end stays put under it
    refused: null, // why the gateway refuses to read this store's past (401, 403), or null
  };
  const cache = new Map(); // `${epoch}:${version}` -> Map of models

  // A read of the past belongs to the live store's life unless both name different epochs.
  const sameLife = (epochOfRead) => s.epoch == null || epochOfRead === s.epoch;
  const setText = (node, text) => { if (node.textContent !== text) node.textContent = text; };
  const path = (version) => `/api/stores/${encodeURIComponent(store())}?at=${version}`;

  async function read(version) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path(version), { headers });
    let payload = null;
    try { payload = await response.json(); } catch { payload = null; }
    return { status: response.status, payload: payload && typeof payload === 'object' ? payload : {} };
  }

  // ---- The range ----

  function setOldest(oldest) {
    if (!Number.isSafeInteger(oldest) || oldest < 0) return;
    s.oldest = oldest;
    render();
  }

  /** Asks for the oldest readable version, at most once a second unless `force`. */
  async function refreshOldest(force = false) {
    const now = performance.now();
    if (s.oldestInFlight || (!force && now - s.oldestAskedAt < OLDEST_REFRESH_MS)) return;
    s.oldestInFlight = true;
    s.oldestAskedAt = now;
    const life = s.life;
    let answer = null;
    try {
      answer = await read(0);
    } catch {
      // The range keeps the bound it had; a read past it answers 410 and corrects it.
    }
    s.oldestInFlight = false;
    if (life !== s.life) {
      refreshOldest(true); // the answer was about another store or another life of this one
    } else if (answer && answer.status === 200 && sameLife(answer.payload.epoch)) {
      setOldest(0);
    } else if (answer && answer.status === 410) {
      setOldest(answer.payload.oldest);
    } else if (answer && (answer.status === 401 || answer.status === 403)) {
      refuse(answer);
    }
  }

  /** The gateway will not read this store's past for this page: said once, and the range stays put. */
  function refuse({ status, payload }) {
    const reason = payload.detail || payload.error || `HTTP ${status}`;
    if (s.refused === null) showToast(`The history cannot be read: ${reason}`);
    s.refused = reason;
    if (s.mode === 'past') goLive();
    render();
  }

  function onMove() {
    const live = view.version;
    if (live === null || el.range.disabled) return;
    const version = Number(el.range.value);
    if (s.mode === 'live') {
      s.mode = 'past';
      refreshOldest();
    }
    if (version >= live) {
      goLive();
      return;
    }
    s.wanted = version;
    render();
    if (s.timer === null) s.timer = setTimeout(() => { s.timer = null; pump(); }, SCRUB_THROTTLE_MS);
  }

  // ---- Reads of the past ----

  async function pump() {
    if (s.inFlight || s.wanted === null) return;
    const version = s.wanted;
    s.wanted = null;
    if (version === s.shown) { // already shown (the change event after the input events of a drag)
      render();
      pump();
      return;
    }
    const key = `${s.epoch}:${version}`;
    if (cache.has(key)) {
      const models = cache.get(key);
      cache.delete(key);
      cache.set(key, models);
      show(version, models);
      pump();
      return;
    }
    const generation = s.generation;
    s.inFlight = true;
    render();
    let result = null;
    try {
      result = await read(version);
    } catch (error) {
      result = { status: 0, payload: { detail: error && error.message ? error.message : 'network error' } };
    }
    s.inFlight = false;
    if (generation === s.generation) answered(version, key, result);
    pump();
    render();
  }

  function answered(version, key, { status, payload }) {
    if (status === 200 && payload.version === version && sameLife(payload.epoch)
        && payload.models && typeof payload.models === 'object') {
      const models = new Map(Object.entries(payload.models));
      cache.set(key, models);
      while (cache.size > CACHED_SNAPSHOTS) cache.delete(cache.keys().next().value);
      show(version, models);
    } else if (status === 410) {
      // Older than kept: the range starts at the oldest readable version from now on.
      setOldest(payload.oldest);
      if (s.wanted === null && s.oldest !== null) {
        s.wanted = Math.max(version, s.oldest);
        el.range.value = String(s.wanted);
      }
    } else if (status === 200 || status === 400) {
      goLive(); // another life of the store (a restart without --data-dir): its past is not this one
    } else if (status === 401 || status === 403) {
      refuse({ status, payload });
    } else {
      showToast(`Could not read version ${version}: ${payload.detail || payload.error || `HTTP ${status}`}`);
      if (s.shown === null && s.wanted === null) goLive();
    }
  }

  function show(version, models) {
    s.shown = version;
    view.pin({ version, models });
    render();
  }

  function goLive() {
    s.generation += 1;
    s.mode = 'live';
    s.wanted = null;
    s.shown = null;
    clearTimeout(s.timer);
    s.timer = null;
    if (view.pinned) view.pin(null);
    render();
    refreshOldest();
  }

  // ---- Rendering ----

  function render() {
    const live = view.version;
    const past = s.mode === 'past';
    el.root.dataset.mode = s.mode;
    el.live.disabled = !past;
    if (live === null) {
      el.range.disabled = true;
      setText(el.label, 'Waiting for the first snapshot');
      for (const node of [el.changed, el.min, el.max]) setText(node, '');
      return;
    }
    // The end follows the live version, except under a dragging pointer (the thumb would slide).
    const max = s.dragging ? Math.min(live, Math.max(Number(el.range.max), s.shown ?? 0)) : live;
    const oldest = s.oldest === null ? max : Math.min(s.oldest, max);
    const min = s.shown !== null ? Math.min(oldest, s.shown) : oldest;
    // Bounds first, then the value, which the range would otherwise clamp to the old bounds.
    if (el.range.min !== String(min)) el.range.min = String(min);
    if (el.range.max !== String(max)) el.range.max = String(max);
    // The thumb rests on the version shown, or live; while a position is being read it is left alone.
    if (!past) el.range.value = String(live);
    else if (s.shown !== null && s.wanted === null && !s.inFlight) el.range.value = String(s.shown);
    el.range.disabled = (!past && min >= max) || s.refused !== null;
    setText(el.min, String(min));
    setText(el.max, String(max));
    let label;
    if (!past) label = s.refused === null ? `Live · version ${live}` : `Live · version ${live} · history not readable`;
    else if (s.shown !== null) label = `version ${s.shown} of ${live}`;
    else label = `Reading version ${el.range.value}…`;
    setText(el.label, label);
    el.range.setAttribute('aria-valuetext', past && s.shown !== null ? label : `version ${el.range.value}`);
    el.root.setAttribute('aria-busy', String(past && (s.inFlight || s.wanted !== null)));
    setText(el.changed, s.shown === null ? '' : changesSince());
  }

  /**
   * What differs between the version shown and the live store: the marked tiles, which have
   * changed or been deleted since, and the models created since, which have no tile at that version.
   */
  function changesSince() {
    let deleted = 0;
    for (const id of view.changed) if (!view.models.has(id)) deleted += 1;
    const counts = [[view.changed.size - deleted, 'changed'], [view.created.length, 'created'], [deleted, 'deleted']]
      .filter(([count]) => count > 0);
    if (counts.length === 0) return 'Nothing changed since';
    const [[first, verb], ...rest] = counts;
    const parts = [`${first} ${first === 1 ? 'model' : 'models'} ${verb}`, ...rest.map(([n, v]) => `${n} ${v}`)];
    return `${parts.join(', ')} since`;
  }

  /** After each paint of the live view: follows a new epoch, and the live version while live. */
  function livePainted() {
    const current = epoch();
    if (view.version !== null && current !== s.epoch) {
      s.epoch = current;
      s.life += 1;
      s.oldest = null;
      s.refused = null;
      cache.clear();
      if (s.mode === 'past') goLive();
      refreshOldest(true);
    }
    render();
  }

  function reset() {
    s.generation += 1;
    s.life += 1;
    s.mode = 'live';
    s.epoch = undefined;
    s.oldest = null;
    s.refused = null;
    s.shown = null;
    s.wanted = null;
    clearTimeout(s.timer);
    s.timer = null;
    cache.clear();
    render();
  }

  el.range.addEventListener('input', onMove);
  el.range.addEventListener('change', onMove);
  el.range.addEventListener('pointerdown', () => { s.dragging = true; refreshOldest(); });
  for (const type of ['pointerup', 'pointercancel']) {
    window.addEventListener(type, () => { if (s.dragging) { s.dragging = false; render(); } });
  }
  el.range.addEventListener('focus', () => refreshOldest());
  el.range.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && s.mode === 'past') { event.preventDefault(); goLive(); }
  });
  el.live.addEventListener('click', () => { goLive(); el.range.focus(); });
  render();

  return {
    livePainted,
    reset,
    /** For tests and debugging: a copy of the scrubber's state. */
    state: () => ({
      mode: s.mode,
      shownVersion: s.shown,
      liveVersion: view.version,
      oldest: s.oldest,
      min: Number(el.range.min),
      max: Number(el.range.max),
      value: Number(el.range.value),
      label: el.label.textContent,
      changed: [...view.changed].sort(),
      created: view.created.sort(),
      busy: s.inFlight || s.wanted !== null,
      refused: s.refused,
    }),
  };
}
