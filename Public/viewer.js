// The Receptionist viewer: one model store as a grid of live tiles, and beside it the same store
// as a client with subscription options sees it (only `color`, at most `maxRate` frames a second,
// optionally only the ids with a given prefix).
//
// Both views are subscriptions of receptionist-client.js (docs/CLIENT.md), which speaks
// WebSocket (`/ws`, subprotocol `receptionist.v1`) or, when WebSocket is missing or never manages
// to open, Server-Sent Events, and reconnects and resumes by itself. docs/PROTOCOL.md specifies
// both. Everything the server sends is data: labels go in with textContent and colors are
// validated before they reach style.backgroundColor, so a model can never inject markup or CSS.

import { ReceptionistClient } from './receptionist-client.js';
import { createHistory, sameValue } from './viewer-history.js';

const DEFAULT_STORE = 'tiles';
const JOB_POLL_MS = 3000;
const LATENCY_SMOOTHING = 0.2;
const SHARE_WINDOW_SECONDS = 5;
const COALESCED_PATHS = ['color'];
const SWATCHES = ['#ff7a59', '#ffc53d', '#73d13d', '#36cfc9', '#4096ff', '#9254de', '#262626'];

const $ = (id) => document.getElementById(id);
const ui = {
  grid: $('grid'), empty: $('empty'), title: $('board-title'), meta: $('board-meta'),
  status: $('status'), statusText: $('status-text'), countdown: $('status-countdown'),
  store: $('store'), rate: $('stat-rate'), version: $('stat-version'), uptime: $('stat-uptime'),
  latency: $('stat-latency'), transport: $('stat-transport'),
  liveFps: $('live-fps'), liveBps: $('live-bps'), liveStaleness: $('live-staleness'),
  coalesced: $('coalesced'), coalescedStatus: $('coalesced-status'), coalescedOptions: $('coalesced-options'),
  coalescedGrid: $('coalesced-grid'), coalescedEmpty: $('coalesced-empty'), coalescedShare: $('coalesced-share'),
  coalescedFps: $('coalesced-fps'), coalescedBps: $('coalesced-bps'), coalescedStaleness: $('coalesced-staleness'),
  coalescedRate: $('coalesced-rate'), coalescedRateValue: $('coalesced-rate-value'), followPrefix: $('follow-prefix'),
  jobState: $('animate-state'), start: $('animate-start'), stop: $('animate-stop'),
  rateInput: $('animate-rate'), rateValue: $('animate-rate-value'),
  brush: $('brush'), swatches: $('swatches'), toast: $('toast'),
};

const params = new URLSearchParams(location.search);
const reducedMotion = window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)');

// ---- Colors --------------------------------------------------------------------------------

const HEX_COLOR = /^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i;
const NUMBER = '(?:\\d{1,3}(?:\\.\\d+)?%?)';
const ALPHA = '(?:0|1|0?\\.\\d+|\\d{1,3}%)';
const RGB_COLOR = new RegExp(
  `^rgba?\\(\\s*${NUMBER}\\s*(?:,\\s*${NUMBER}\\s*,\\s*${NUMBER}\\s*(?:,\\s*${ALPHA}\\s*)?` +
  `|\\s${NUMBER}\\s+${NUMBER}\\s*(?:\\/\\s*${ALPHA}\\s*)?)\\)$`, 'i');
const NAMED_COLOR = /^[a-z]{3,20}$/i;
const NOT_COLORS = new Set(['inherit', 'initial', 'unset', 'revert', 'currentcolor']);

/** The color as a CSS value if it is a hex, rgb() or named color; otherwise null. */
function safeColor(value) {
  if (typeof value !== 'string' || value.length > 64) return null;
  const text = value.trim();
  let shaped = HEX_COLOR.test(text) || RGB_COLOR.test(text);
  if (!shaped && NAMED_COLOR.test(text)) shaped = !NOT_COLORS.has(text.toLowerCase());
  if (!shaped) return null;
  if (window.CSS && CSS.supports && !CSS.supports('color', text)) return null;
  return HEX_COLOR.test(text) ? text.toLowerCase() : text;
}

const colorProbe = document.createElement('canvas').getContext('2d');
const inkCache = new Map();

/** 'dark' or 'light': the text color that reads best on `color`. */
function inkFor(color) {
  let ink = inkCache.get(color);
  if (ink) return ink;
  ink = 'light';
  if (colorProbe) {
    colorProbe.fillStyle = '#000000';
    colorProbe.fillStyle = color;
    const rgb = parseRGB(colorProbe.fillStyle);
    if (rgb) {
      const [r, g, b] = rgb.map((c) => {
        const s = c / 255;
        return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      });
      ink = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.36 ? 'dark' : 'light';
    }
  }
  if (inkCache.size > 2048) inkCache.clear();
  inkCache.set(color, ink);
  return ink;
}

function parseRGB(text) {
  const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(text);
  if (hex) return hex.slice(1).map((h) => parseInt(h, 16));
  const rgb = /^rgba?\((\d+),\s*(\d+),\s*(\d+)/i.exec(text);
  return rgb ? rgb.slice(1).map(Number) : null;
}

// ---- Traffic meters ------------------------------------------------------------------------
//
// Frames and bytes as the subscription received them, and staleness: at each paint, the time
// from the commit of the oldest change it shows (a coalesced frame's `firstCommittedAt`) to the
// paint. Commit times are the gateway's wall clock in microseconds; the page's clock is assumed
// to agree with it (the same machine, or clocks kept in sync).

class Meter {
  constructor() { this.reset(); }

  reset() {
    this.frames = 0; // totals since the subscription started
    this.bytes = 0;
    this.changes = 0;
    this.lastTick = performance.now();
    this.mark = { frames: 0, bytes: 0, changes: 0 };
    this.perSecond = { frames: 0, bytes: 0, changes: 0 };
    this.history = []; // {frames, bytes} per tick, the last SHARE_WINDOW_SECONDS of them
    this.stalenessSum = 0;
    this.stalenessCount = 0;
    this.staleness = null;
  }

  frame(meta) {
    this.frames += 1;
    this.bytes += meta.bytes || 0;
    this.changes += meta.changes || 0;
  }

  stale(ms) {
    this.stalenessSum += Math.max(0, ms);
    this.stalenessCount += 1;
  }

  tick() {
    const now = performance.now();
    const seconds = (now - this.lastTick) / 1000;
    if (seconds <= 0) return;
    const delta = {
      frames: this.frames - this.mark.frames,
      bytes: this.bytes - this.mark.bytes,
      changes: this.changes - this.mark.changes,
    };
    for (const key of Object.keys(delta)) this.perSecond[key] = delta[key] / seconds;
    this.history.push({ frames: delta.frames, bytes: delta.bytes });
    if (this.history.length > SHARE_WINDOW_SECONDS) this.history.shift();
    this.mark = { frames: this.frames, bytes: this.bytes, changes: this.changes };
    this.lastTick = now;
    if (this.stalenessCount > 0) this.staleness = this.stalenessSum / this.stalenessCount;
    this.stalenessSum = 0;
    this.stalenessCount = 0;
  }

  recent(key) {
    return this.history.reduce((sum, entry) => sum + entry[key], 0);
  }
}

// ---- Tile views ----------------------------------------------------------------------------
//
// A view shows one store subscription. Frames update the subscription's models as they arrive;
// the DOM follows in one requestAnimationFrame callback, so everything that arrived within a
// frame (an atomic change set always among it) is painted together. While the tab is hidden
// nothing is painted: the dirty set keeps only ids, so it never grows past the size of the store,
// and one paint catches up when shown. A view can be pinned to a past version of the store (the
// history scrubber): the tiles then show that version, marked where it differs from the live
// models, while frames keep updating the live models underneath.

const collator = new Intl.Collator(undefined, { numeric: true });

class TileView {
  constructor({ grid, empty, compact, onPaint }) {
    this.grid = grid;
    this.empty = empty;
    this.compact = compact;
    this.onPaint = onPaint || (() => {});
    this.meter = new Meter();
    this.sub = null;
    this.listeners = [];
    this.tiles = new Map(); // model id -> {el, label, code, color}
    this.dirty = new Set();
    this.repaintAll = false;
    this.membershipChanged = false;
    this.frameRequested = false;
    this.paintedVersion = null;
    this.newestCommittedAt = 0; // microseconds; of the newest change set not painted yet
    this.oldestCommittedAt = Infinity; // of the oldest change not painted yet
    this.hiddenSinceCommit = false;
    this.pinned = null; // {version, models} shown instead of the live models while scrubbed back
    this.changed = new Set(); // ids of the pinned tiles that differ from the live models
  }

  /** Shows `sub` from now on (or nothing, for null), starting from an empty grid. */
  attach(sub) {
    for (const off of this.listeners) off();
    this.listeners = [];
    this.clear();
    this.meter.reset();
    this.sub = sub;
    if (!sub) return;
    this.listeners = [
      sub.on('snapshot', () => {
        this.repaintAll = true;
        this.newestCommittedAt = 0;
        this.oldestCommittedAt = Infinity;
        this.schedulePaint();
      }),
      sub.on('change', (change) => this.dirty.add(change.model)),
      sub.on('frame', (frame) => {
        this.meter.frame(frame);
        if (frame.type !== 'changes') return;
        if (typeof frame.committedAt === 'number') this.newestCommittedAt = Math.max(this.newestCommittedAt, frame.committedAt);
        if (typeof frame.firstCommittedAt === 'number') this.oldestCommittedAt = Math.min(this.oldestCommittedAt, frame.firstCommittedAt);
        this.schedulePaint();
      }),
    ];
  }

  get models() { return this.sub ? this.sub.models : new Map(); }

  get version() { return this.sub ? this.sub.version : null; }

  /** The models the tiles show: the pinned version's, or the live ones. */
  get shown() { return this.pinned ? this.pinned.models : this.models; }

  /** Shows `past` ({version, models}) instead of the live models; null shows the live ones again. */
  pin(past) {
    this.pinned = past;
    this.repaintAll = true;
    this.schedulePaint();
  }

  schedulePaint() {
    if (this.frameRequested || document.visibilityState === 'hidden') return;
    this.frameRequested = true;
    requestAnimationFrame(() => this.paint());
  }

  paint() {
    this.frameRequested = false;
    if (document.visibilityState === 'hidden' || !this.sub) return;
    const models = this.shown;
    const animate = !this.repaintAll && !this.pinned && !(reducedMotion && reducedMotion.matches);
    const ids = this.repaintAll ? [...models.keys()] : [...this.dirty];
    if (this.repaintAll) {
      for (const [id, tile] of this.tiles) {
        if (!models.has(id)) { tile.el.remove(); this.tiles.delete(id); this.changed.delete(id); }
      }
    }
    for (const id of ids) this.paintTile(id, animate);
    if (this.repaintAll || this.membershipChanged) this.orderTiles();
    this.dirty.clear();
    this.repaintAll = this.membershipChanged = false;
    this.paintedVersion = this.sub.version;
    this.empty.hidden = this.sub.version === null || models.size > 0;
    const now = Date.now();
    const sample = this.newestCommittedAt > 0 && !this.hiddenSinceCommit ? now - this.newestCommittedAt / 1000 : null;
    if (this.oldestCommittedAt !== Infinity && !this.hiddenSinceCommit) this.meter.stale(now - this.oldestCommittedAt / 1000);
    this.newestCommittedAt = 0;
    this.oldestCommittedAt = Infinity;
    this.hiddenSinceCommit = false;
    this.onPaint(sample);
  }

  paintTile(id, animate) {
    const model = this.shown.get(id);
    let tile = this.tiles.get(id);
    if (model === undefined) {
      if (tile) { tile.el.remove(); this.tiles.delete(id); this.changed.delete(id); }
      return;
    }
    if (!tile) {
      tile = this.compact ? createMiniTile(id) : createTile(id);
      this.tiles.set(id, tile);
      this.membershipChanged = true;
    }
    const fields = model !== null && typeof model === 'object' ? model : {};
    const label = typeof fields.label === 'string' || typeof fields.label === 'number'
      ? String(fields.label) : id;
    const color = safeColor(fields.color);
    if (tile.label && tile.label.textContent !== label) tile.label.textContent = label;
    if (color !== tile.color) {
      tile.color = color;
      tile.el.style.backgroundColor = color || '';
      tile.el.classList.toggle('tile--blank', !color);
      if (tile.code) {
        tile.el.dataset.ink = color ? inkFor(color) : 'muted';
        tile.code.textContent = color || 'no color';
      }
      if (animate && color && !this.compact) pulse(tile.el);
    }
    let description = color ? `${label}, color ${color}` : `${label}, no color`;
    const changed = this.pinned !== null && !sameValue(model, this.models.get(id));
    if (changed) this.changed.add(id); else this.changed.delete(id);
    tile.el.classList.toggle('tile--changed', changed);
    if (this.pinned) description += ` at version ${this.pinned.version}${changed ? ', changed since' : ''}`;
    tile.el.setAttribute('aria-label', description);
    if (this.compact) tile.el.title = description;
  }

  orderTiles() {
    const ids = [...this.tiles.keys()].sort(collator.compare);
    const fragment = document.createDocumentFragment();
    for (const id of ids) fragment.append(this.tiles.get(id).el);
    this.grid.append(fragment);
  }

  clear() {
    for (const tile of this.tiles.values()) tile.el.remove();
    this.tiles.clear();
    this.dirty.clear();
    this.changed.clear();
    this.pinned = null;
    this.paintedVersion = null;
    this.repaintAll = this.membershipChanged = false;
    this.newestCommittedAt = 0;
    this.oldestCommittedAt = Infinity;
    this.empty.hidden = true;
  }
}

function createTile(id) {
  const el = document.createElement('button');
  el.type = 'button';
  el.className = 'tile';
  el.dataset.model = id;
  const label = document.createElement('span');
  label.className = 'tile-label';
  const code = document.createElement('span');
  code.className = 'tile-code';
  code.setAttribute('aria-hidden', 'true');
  el.append(code, label);
  return { el, label, code, color: undefined };
}

function createMiniTile(id) {
  const el = document.createElement('span');
  el.className = 'mini-tile';
  el.setAttribute('role', 'img');
  el.dataset.model = id;
  return { el, label: null, code: null, color: undefined };
}

function pulse(el) {
  if (!el.animate) return;
  el.animate(
    [{ boxShadow: '0 0 0 3px var(--pulse)' }, { boxShadow: '0 0 0 0 transparent' }],
    { duration: 450, easing: 'ease-out' },
  );
}

// ---- The live view -------------------------------------------------------------------------

const state = {
  store: chooseStore(),
  smoothedLatencyMs: null,
};

function chooseStore() {
  const named = params.get('store');
  return named && named.length <= 256 ? named : DEFAULT_STORE;
}

const liveView = new TileView({
  grid: ui.grid,
  empty: ui.empty,
  compact: false,
  onPaint(sample) {
    if (sample !== null) {
      state.smoothedLatencyMs = state.smoothedLatencyMs === null ? sample
        : state.smoothedLatencyMs + LATENCY_SMOOTHING * (sample - state.smoothedLatencyMs);
    }
    renderStats();
    scrubber.livePainted();
  },
});

const coalescedView = new TileView({ grid: ui.coalescedGrid, empty: ui.coalescedEmpty, compact: true });

document.addEventListener('visibilitychange', () => {
  for (const view of [liveView, coalescedView]) {
    if (document.visibilityState === 'hidden') view.hiddenSinceCommit = true;
    else view.schedulePaint();
  }
});

// ---- Connections ---------------------------------------------------------------------------
//
// The live view subscribes without options. The second view needs a connection of its own (a
// connection holds one subscription per store); it opens once the live view has found a
// transport, and uses the same one.

const token = params.get('token') || undefined;
const liveClient = new ReceptionistClient({ token, transport: params.get('transport') === 'sse' ? 'sse' : 'auto' });
let coalescedClient = null;
let liveSub = null;
let coalescedSub = null;

const connection = {
  everLive: false,
  liveSince: null,
  retryAt: null,
};

// The history scrubber under the tiles (viewer-history.js) pins the live view to past versions.
const scrubber = createHistory({
  view: liveView, store: () => state.store, epoch: () => (liveSub ? liveSub.epoch : null), showToast,
});

/** A fresh subscription to `state.store` for the live view. */
function subscribeLive() {
  if (liveSub) liveSub.unsubscribe();
  const sub = liveClient.subscribeStore(state.store);
  liveSub = sub;
  liveView.attach(sub);
  sub.on('status', (event) => { if (sub === liveSub) onLiveStatus(event); });
  sub.on('error', (error) => { if (sub === liveSub) showToast(`The gateway says: ${error.message || error.code}`); });
  onLiveStatus({ status: sub.status, retryAt: null, error: null });
}

function onLiveStatus({ status, retryAt, error }) {
  ui.transport.textContent = liveClient.transport === 'sse' ? 'SSE' : 'WebSocket';
  connection.retryAt = status === 'reconnecting' ? retryAt : null;
  if (status !== 'live') connection.liveSince = null;
  switch (status) {
    case 'live':
      connection.everLive = true;
      connection.liveSince = Date.now();
      setStatus('live', 'Live');
      jobs.refresh();
      stores.refresh();
      startCoalesced();
      break;
    case 'connecting':
      setStatus(connection.everLive ? 'reconnecting' : 'connecting', connection.everLive ? 'Reconnecting…' : 'Connecting…');
      break;
    case 'reconnecting':
      if (error && error.code === 'no_such_store') setStatus('offline', `No store named “${state.store}”`);
      else if (error) setStatus('offline', 'Refused');
      else setStatus('reconnecting', 'Reconnecting');
      break;
    case 'offline':
      setStatus('offline', 'Offline');
      break;
    case 'failed':
      setStatus('offline', 'Refused');
      break;
    default:
      break;
  }
  renderCountdown();
}

function setStatus(status, text) {
  ui.status.dataset.status = status;
  if (ui.statusText.textContent !== text) ui.statusText.textContent = text;
}

function renderCountdown() {
  if (connection.retryAt === null) {
    ui.countdown.textContent = '';
    return;
  }
  const seconds = Math.max(1, Math.ceil((connection.retryAt - Date.now()) / 1000));
  ui.countdown.textContent = `in ${seconds} s`;
}

/** Switches both views to another store: fresh subscriptions and fresh state. */
function switchTo(store) {
  state.store = store;
  state.smoothedLatencyMs = null;
  connection.everLive = false;
  scrubber.reset();
  renderStore();
  subscribeLive();
  subscribeCoalesced();
  renderStats();
}

// ---- The coalesced view --------------------------------------------------------------------

const coalesced = {
  maxRate: Number(ui.coalescedRate.value) || 5,
  prefix: '', // follow the ids that start with it; '' follows every model
  rateEdit: null, // debounce timers for the two controls
  prefixEdit: null,
};

function startCoalesced() {
  if (coalescedClient) return;
  coalescedClient = new ReceptionistClient({ token, transport: liveClient.transport });
  subscribeCoalesced();
}

function coalescedOptions() {
  const options = { paths: COALESCED_PATHS, maxRate: coalesced.maxRate };
  if (coalesced.prefix) options.models = [`${coalesced.prefix}*`];
  return options;
}

/** (Re)subscribes the second view with the current options. */
function subscribeCoalesced() {
  if (coalescedSub) coalescedSub.unsubscribe();
  coalescedSub = null;
  const options = coalescedOptions();
  ui.coalescedOptions.textContent = JSON.stringify(options);
  if (!coalescedClient) {
    coalescedView.attach(null);
    return;
  }
  const sub = coalescedClient.subscribeStore(state.store, options);
  coalescedSub = sub;
  coalescedView.attach(sub);
  const show = ({ status }) => {
    if (sub !== coalescedSub) return;
    ui.coalesced.dataset.status = status;
    ui.coalescedStatus.setAttribute('aria-label', status[0].toUpperCase() + status.slice(1));
  };
  sub.on('status', show);
  show({ status: sub.status });
  renderStats();
}

ui.coalescedRate.addEventListener('input', () => {
  const rate = Number(ui.coalescedRate.value);
  ui.coalescedRateValue.textContent = `${rate} / s`;
  clearTimeout(coalesced.rateEdit);
  coalesced.rateEdit = setTimeout(() => {
    if (rate === coalesced.maxRate) return;
    coalesced.maxRate = rate;
    subscribeCoalesced();
  }, 150);
});

ui.followPrefix.addEventListener('input', () => {
  clearTimeout(coalesced.prefixEdit);
  coalesced.prefixEdit = setTimeout(() => {
    const prefix = ui.followPrefix.value.trim().replace(/\*+$/, '');
    if (prefix === coalesced.prefix) return;
    coalesced.prefix = prefix;
    subscribeCoalesced();
  }, 300);
});

// ---- Live panel and meters -----------------------------------------------------------------

function renderStats() {
  const live = liveView.meter;
  ui.rate.textContent = formatRate(live.perSecond.changes);
  ui.version.textContent = liveView.paintedVersion === null ? '–' : String(liveView.paintedVersion);
  ui.latency.textContent = state.smoothedLatencyMs === null ? '–' : `${Math.max(0, Math.round(state.smoothedLatencyMs))} ms`;
  const since = connection.liveSince;
  ui.uptime.textContent = since === null ? '–' : formatDuration((Date.now() - since) / 1000);
  const version = liveView.version;
  const count = liveView.models.size;
  ui.meta.textContent = version === null ? 'Waiting for the first snapshot'
    : `${count} ${count === 1 ? 'model' : 'models'} · version ${version}`;
  renderMeter(live, ui.liveFps, ui.liveBps, ui.liveStaleness);
  renderMeter(coalescedView.meter, ui.coalescedFps, ui.coalescedBps, ui.coalescedStaleness);
  ui.coalescedShare.textContent = shareText();
}

function renderMeter(meter, fps, bps, staleness) {
  fps.textContent = formatRate(meter.perSecond.frames);
  bps.textContent = formatBytes(meter.perSecond.bytes);
  staleness.textContent = meter.staleness === null ? '–' : `${Math.round(meter.staleness)} ms`;
}

/** The second view's traffic as a share of the live view's, over the last few seconds. */
function shareText() {
  const liveFrames = liveView.meter.recent('frames');
  const liveBytes = liveView.meter.recent('bytes');
  if (!coalescedSub || liveFrames === 0 || liveBytes === 0) return 'Waiting for frames';
  const percent = (part, whole) => {
    const value = (100 * part) / whole;
    return value < 10 ? value.toFixed(1).replace(/\.0$/, '') : String(Math.round(value));
  };
  return `${percent(coalescedView.meter.recent('frames'), liveFrames)} % of the live frames · ` +
    `${percent(coalescedView.meter.recent('bytes'), liveBytes)} % of the bytes`;
}

function formatRate(value) {
  if (value >= 100) return String(Math.round(value));
  return value >= 10 ? value.toFixed(0) : value.toFixed(1).replace(/\.0$/, '');
}

function formatBytes(value) {
  if (value < 1000) return `${Math.round(value)} B`;
  if (value < 1e6) return `${(value / 1e3).toFixed(value < 1e4 ? 1 : 0)} kB`;
  return `${(value / 1e6).toFixed(1)} MB`;
}

function formatDuration(totalSeconds) {
  const s = Math.floor(totalSeconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

setInterval(() => {
  liveView.meter.tick();
  coalescedView.meter.tick();
  renderCountdown();
  if (document.visibilityState !== 'hidden') renderStats();
}, 1000);

// ---- HTTP API ------------------------------------------------------------------------------

async function api(method, path, body) {
  const init = { method, headers: {} };
  // A page given a token (`?token=`) writes with it: its `write` claim lets the gateway take a
  // paint without the API key.
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let payload = null;
  try { payload = text ? JSON.parse(text) : null; } catch { payload = null; }
  if (!response.ok) {
    const detail = payload && (payload.detail || payload.error);
    throw new Error(`${response.status} ${detail || response.statusText}`);
  }
  return payload;
}

const storePath = (store) => `/api/stores/${encodeURIComponent(store)}`;

let toastTimer = null;
function showToast(text) {
  ui.toast.textContent = text;
  ui.toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { ui.toast.hidden = true; }, 4000);
}

// ---- Store picker --------------------------------------------------------------------------

const stores = (() => {
  let names = [];
  async function refresh() {
    try {
      const payload = await api('GET', '/api/stores');
      names = (payload && Array.isArray(payload.stores) ? payload.stores : [])
        .map((entry) => entry && entry.name).filter((name) => typeof name === 'string');
    } catch {
      // The list is a convenience; the current store stays selectable without it.
    }
    render();
  }
  function render() {
    const all = [...new Set([...names, state.store])].sort(collator.compare);
    const existing = [...ui.store.options].map((option) => option.value);
    if (existing.join('\u0000') !== all.join('\u0000')) {
      ui.store.replaceChildren(...all.map((name) => {
        const option = document.createElement('option');
        option.value = name;
        option.textContent = name;
        return option;
      }));
    }
    ui.store.value = state.store;
  }
  return { refresh, render };
})();

ui.store.addEventListener('change', () => {
  const store = ui.store.value;
  if (!store || store === state.store) return;
  const url = new URL(location.href);
  url.searchParams.set('store', store);
  history.replaceState(null, '', url);
  switchTo(store);
  jobs.refresh();
});
ui.store.addEventListener('focus', () => stores.refresh());

function renderStore() {
  ui.title.textContent = state.store;
  document.title = `${state.store} · Receptionist`;
  stores.render();
}

// ---- Animate job ---------------------------------------------------------------------------

const jobs = (() => {
  let running = []; // this store's running animate jobs
  let known = false;
  let rateEdit = null;

  async function refresh() {
    try {
      const payload = await api('GET', '/api/jobs');
      const list = payload && Array.isArray(payload.jobs) ? payload.jobs : [];
      running = list.filter((job) => job && job.store === state.store && job.kind === 'animate' && job.state === 'running');
      known = true;
    } catch {
      known = false;
    }
    render();
  }

  function render() {
    const jobState = !known ? 'unknown' : running.length > 0 ? 'running' : 'stopped';
    ui.jobState.dataset.state = jobState;
    if (!known) {
      ui.jobState.textContent = 'Jobs unavailable';
    } else if (running.length > 0) {
      const rate = running.reduce((sum, job) => sum + (Number(job.rate) || 0), 0);
      ui.jobState.textContent = `Running · ${running.map((job) => job.id).join(', ')} · ${formatJobRate(rate)}`;
      if (rateEdit === null && document.activeElement !== ui.rateInput) showRate(rate);
    } else {
      ui.jobState.textContent = 'Stopped';
    }
    ui.start.disabled = !known || running.length > 0;
    ui.stop.disabled = !known || running.length === 0;
  }

  function showRate(rate) {
    const clamped = Math.min(Number(ui.rateInput.max), Math.max(Number(ui.rateInput.min), Math.round(rate)));
    ui.rateInput.value = String(clamped);
    ui.rateValue.textContent = `${formatJobRate(rate)}`;
  }

  async function act(work) {
    ui.start.disabled = ui.stop.disabled = true;
    try { await work(); } catch (error) { showToast(`Animate: ${error.message}`); }
    await refresh();
  }

  ui.start.addEventListener('click', () => act(() =>
    api('POST', '/api/jobs', { kind: 'animate', store: state.store, rate: Number(ui.rateInput.value) })));
  ui.stop.addEventListener('click', () => act(() =>
    Promise.all(running.map((job) => api('DELETE', `/api/jobs/${encodeURIComponent(job.id)}`)))));
  ui.rateInput.addEventListener('input', () => {
    ui.rateValue.textContent = formatJobRate(Number(ui.rateInput.value));
    clearTimeout(rateEdit);
    rateEdit = setTimeout(() => {
      rateEdit = null;
      const rate = Number(ui.rateInput.value);
      if (running.length > 0) {
        act(() => Promise.all(running.map((job) => api('PATCH', `/api/jobs/${encodeURIComponent(job.id)}`, { rate }))));
      }
    }, 150);
  });

  setInterval(() => { if (document.visibilityState !== 'hidden') refresh(); }, JOB_POLL_MS);
  return { refresh };
})();

function formatJobRate(rate) {
  const text = rate >= 10 || Number.isInteger(rate) ? String(Math.round(rate)) : String(Number(rate.toPrecision(2)));
  return `${text} / s`;
}

// ---- Painting tiles by hand ----------------------------------------------------------------

for (const color of SWATCHES) {
  const swatch = document.createElement('button');
  swatch.type = 'button';
  swatch.className = 'swatch';
  swatch.style.backgroundColor = color;
  swatch.setAttribute('aria-label', `Brush ${color}`);
  swatch.addEventListener('click', () => { ui.brush.value = color; markBrush(); });
  ui.swatches.append(swatch);
}

function markBrush() {
  for (const swatch of ui.swatches.children) {
    swatch.setAttribute('aria-pressed', String(swatch.getAttribute('aria-label') === `Brush ${ui.brush.value}`));
  }
}
ui.brush.addEventListener('input', markBrush);
markBrush();

// Buttons turn Enter and Space into clicks, so one listener serves mouse, touch and keyboard.
ui.grid.addEventListener('click', async (event) => {
  const el = event.target.closest('.tile');
  if (!el || !ui.grid.contains(el)) return;
  const color = safeColor(ui.brush.value);
  if (!color) return;
  try {
    // Over the live view's WebSocket, allowed by the connection's write grant (a token's, or the
    // connect hook's) or by the backend's write hook: a page needs no API key to paint. Over SSE,
    // which carries nothing upstream, by HTTP with the page's token.
    if (liveClient.transport === 'sse') {
      await api('PATCH', `${storePath(state.store)}/models/${encodeURIComponent(el.dataset.model)}`, { color });
    } else {
      await liveClient.commit(state.store, [{ op: 'patch', model: el.dataset.model, value: { color } }]);
    }
  } catch (error) {
    showToast(`Could not paint ${el.dataset.model}: ${error.message}`);
  }
});

// ---- Test and debugging hook (read-only) ---------------------------------------------------

const copy = (models) => JSON.parse(JSON.stringify(Object.fromEntries(models)));

window.receptionistViewer = Object.freeze({
  /** A copy of the live view's models as last applied: {id: model}. */
  state: () => copy(liveView.models),
  version: () => liveView.version,
  paintedVersion: () => liveView.paintedVersion,
  status: () => ui.status.dataset.status,
  transport: () => (liveClient.transport === 'sse' ? 'sse' : 'ws'),
  store: () => state.store,
  /** The history scrubber: its mode, range, the version the tiles show and the marked ids. */
  history: () => scrubber.state(),
  /** The second view: its options, state and versions. */
  coalesced: () => ({
    options: coalescedSub ? JSON.parse(JSON.stringify(coalescedSub.options)) : null,
    state: copy(coalescedView.models),
    version: coalescedView.version,
    paintedVersion: coalescedView.paintedVersion,
    status: coalescedSub ? coalescedSub.status : null,
    transport: coalescedClient ? (coalescedClient.transport === 'sse' ? 'sse' : 'ws') : null,
  }),
  /** Frames and bytes each view's current subscription has received. */
  traffic: () => ({
    live: { frames: liveView.meter.frames, bytes: liveView.meter.bytes },
    coalesced: { frames: coalescedView.meter.frames, bytes: coalescedView.meter.bytes },
  }),
});

renderStore();
ui.coalescedRateValue.textContent = `${coalesced.maxRate} / s`;
ui.coalescedOptions.textContent = JSON.stringify(coalescedOptions());
renderStats();
subscribeLive();
stores.refresh();
jobs.refresh();
