// The Receptionist viewer: one model store as a grid of live tiles, and beside it the same store
// as a client with subscription options sees it (only `color`, at most `maxRate` frames a second,
// optionally only the ids with a given prefix).
//
// Both views are subscriptions of receptionist-client.js (docs/CLIENT.md), which speaks
// WebSocket (`/ws`, subprotocol `receptionist.v1`) or, when WebSocket is missing or never manages
// to open, Server-Sent Events, and reconnects and resumes by itself. docs/PROTOCOL.md specifies
// both. Everything the server sends is data: labels go in with textContent and colors are
// validated before they reach style.backgroundColor, so a model can never inject markup or CSS.
//
// The parts live in viewer/, one module each: the tile views, their meters, colors, the store
// picker, the animate job's controls, the brush; this script wires them to the two connections.

import { ReceptionistClient } from './receptionist-client.js';
import { createHistory } from './viewer-history.js';
import { setUpBrush } from './viewer/brush.js';
import { formatBytes, formatDuration, formatRate } from './viewer/format.js';
import { createJobs } from './viewer/jobs.js';
import { params, token, ui } from './viewer/page.js';
import { createStorePicker } from './viewer/store-picker.js';
import { TileView } from './viewer/tile-view.js';
import { showToast } from './viewer/toast.js';

const DEFAULT_STORE = 'tiles';
// The names the gateway gives stores: 1 to 64 of A-Z a-z 0-9 . _ -, but not `.` or `..`, which
// no URL path can name (docs/PROTOCOL.md).
const STORE_NAME = /^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$/;
const LATENCY_SMOOTHING = 0.2;
const COALESCED_PATHS = ['color'];

// ---- The live view -------------------------------------------------------------------------

const state = {
  store: chooseStore(),
  smoothedLatencyMs: null,
};

function chooseStore() {
  return params.get('store') || DEFAULT_STORE;
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

const liveClient = new ReceptionistClient({ token, transport: params.get('transport') === 'sse' ? 'sse' : 'auto' });
let coalescedClient = null;
let liveSub = null;
let coalescedSub = null;

const connection = {
  everLive: false,
  liveSince: null,
  retryAt: null,
  // The error the alert last said. The client retries a refused subscription with backoff and
  // each retry is refused alike, while the status line already says why; an alert is said again
  // only for another error, or once the subscription has been live in between.
  announced: null,
};

// The history scrubber under the tiles (viewer-history.js) pins the live view to past versions.
const scrubber = createHistory({
  view: liveView, store: () => state.store, epoch: () => (liveSub ? liveSub.epoch : null), showToast, token,
});

/** A fresh subscription to `state.store` for the live view. */
function subscribeLive() {
  if (liveSub) liveSub.unsubscribe();
  liveSub = null;
  if (!STORE_NAME.test(state.store)) {
    // No store can have this name: nothing to subscribe to, and no retry would change that.
    liveView.attach(null);
    const shown = state.store.length > 64 ? `${state.store.slice(0, 64)}…` : state.store;
    setStatus('offline', `“${shown}” is not a store name (1 to 64 of A–Z a–z 0–9 . _ -)`);
    renderStats();
    return;
  }
  const sub = liveClient.subscribeStore(state.store);
  liveSub = sub;
  connection.announced = null;
  liveView.attach(sub);
  sub.on('status', (event) => {
    if (sub !== liveSub) return;
    // The store is gone (deleted, or a restarted gateway does not have it): what the tiles show
    // no longer exists. Both views start over empty, and wait for a store of that name.
    if (event.error && event.error.code === 'no_such_store' && sub.version !== null) {
      queueMicrotask(() => { if (sub === liveSub) switchTo(state.store); });
    }
    onLiveStatus(event);
  });
  sub.on('error', (error) => {
    const text = `The gateway says: ${error.message || error.code}`;
    if (sub !== liveSub || text === connection.announced) return;
    connection.announced = text;
    showToast(text);
  });
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
      connection.announced = null;
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
  renderStore();
  subscribeLive();
  subscribeCoalesced();
  // After the new subscription is attached: the scrubber then shows no version, not the old one's.
  scrubber.reset();
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

setInterval(() => {
  liveView.meter.tick();
  coalescedView.meter.tick();
  renderCountdown();
  if (document.visibilityState !== 'hidden') renderStats();
}, 1000);

// ---- Store picker --------------------------------------------------------------------------

const stores = createStorePicker({ store: () => state.store });

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

const jobs = createJobs({ store: () => state.store, isStoreName: () => STORE_NAME.test(state.store) });

// ---- Painting tiles by hand ----------------------------------------------------------------

setUpBrush({ client: liveClient, store: () => state.store });

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
