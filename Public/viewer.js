// The Receptionist viewer: one model store as a grid of live tiles.
//
// It subscribes over WebSocket (`/ws`, subprotocol `receptionist.v1`) or, when WebSocket is
// missing or never manages to open, over Server-Sent Events. docs/PROTOCOL.md specifies both.
// Everything the server sends is data: labels go in with textContent and colors are validated
// before they reach style.backgroundColor, so a model can never inject markup or CSS.
'use strict';

(() => {
  const PROTOCOL = 'receptionist.v1';
  const DEFAULT_STORE = 'tiles';
  // Reconnect delays double from the base up to the cap; each is drawn from [half, full] of
  // its step ("equal jitter"), so a restarted gateway is not met by every browser at once.
  const BACKOFF_BASE_MS = 500;
  const BACKOFF_MAX_MS = 15000;
  // WebSocket failures in a row, without a single open, after which the viewer switches to SSE
  // (a proxy that refuses upgrades fails every time; one that worked once is just down).
  const WS_FAILURES_BEFORE_SSE = 3;
  const JOB_POLL_MS = 3000;
  const LATENCY_SMOOTHING = 0.2;
  const SWATCHES = ['#ff7a59', '#ffc53d', '#73d13d', '#36cfc9', '#4096ff', '#9254de', '#262626'];

  const $ = (id) => document.getElementById(id);
  const ui = {
    grid: $('grid'), empty: $('empty'), title: $('board-title'), meta: $('board-meta'),
    status: $('status'), statusText: $('status-text'), countdown: $('status-countdown'),
    store: $('store'), rate: $('stat-rate'), version: $('stat-version'), uptime: $('stat-uptime'),
    latency: $('stat-latency'), transport: $('stat-transport'),
    jobState: $('animate-state'), start: $('animate-start'), stop: $('animate-stop'),
    rateInput: $('animate-rate'), rateValue: $('animate-rate-value'),
    brush: $('brush'), swatches: $('swatches'), toast: $('toast'),
  };

  const params = new URLSearchParams(location.search);
  const reducedMotion = window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)');

  // ---- Colors ------------------------------------------------------------------------------

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

  // ---- Model state -------------------------------------------------------------------------

  // Keys that would reach an object's prototype if assigned; a change to such a path is ignored.
  const UNSAFE_KEYS = new Set(['__proto__', 'prototype', 'constructor']);

  const state = {
    store: chooseStore(),
    models: new Map(), // model id -> JSON value
    version: null, // the last version applied, or null before the first snapshot
    epoch: null, // the store's life that version belongs to: a restarted gateway starts a new one
  };

  /** A gateway that requires subscription tokens gets the page's own `?token=` passed on. */
  function tokenQuery(separator) {
    const token = params.get('token');
    return token ? `${separator}token=${encodeURIComponent(token)}` : '';
  }

  function chooseStore() {
    const named = params.get('store');
    return named && named.length <= 256 ? named : DEFAULT_STORE;
  }

  /** Applies one change of a change set to `models`; returns whether the set of ids changed. */
  function applyChange(change) {
    if (!change || typeof change.model !== 'string') return false;
    const id = change.model;
    const path = typeof change.path === 'string' ? change.path : '';
    const removes = change.kind === 'deleted' || change.value === null || change.value === undefined;
    const existed = state.models.has(id);
    if (path === '') {
      if (removes) state.models.delete(id);
      else state.models.set(id, change.value);
      markDirty(id);
      return existed === removes;
    }
    const keys = path.split('.');
    if (keys.some((key) => UNSAFE_KEYS.has(key))) return false;
    let node = state.models.get(id);
    if (node === null || typeof node !== 'object' || Array.isArray(node)) {
      if (removes) return false;
      node = {};
      state.models.set(id, node);
    }
    const root = node;
    for (const key of keys.slice(0, -1)) {
      const next = node[key];
      if (next === null || typeof next !== 'object' || Array.isArray(next)) {
        if (removes) return false;
        node[key] = {};
      }
      node = node[key];
    }
    const last = keys[keys.length - 1];
    if (removes) delete node[last];
    else node[last] = change.value;
    state.models.set(id, root);
    markDirty(id);
    return !existed;
  }

  // ---- Painting ----------------------------------------------------------------------------
  //
  // Messages update `state` as they arrive; the DOM follows in one requestAnimationFrame
  // callback, so everything that arrived within a frame (an atomic change set always among it)
  // is painted together. While the tab is hidden nothing is painted: the dirty set keeps only
  // ids, so it never grows past the size of the store, and one paint catches up when shown.

  const tiles = new Map(); // model id -> {el, label, code, color}
  const dirty = new Set();
  const collator = new Intl.Collator(undefined, { numeric: true });
  let membershipChanged = false;
  let repaintAll = false;
  let frameRequested = false;
  let paintedVersion = null;
  let newestCommittedAt = 0; // microseconds; of the newest change set not painted yet
  let hiddenSinceCommit = false;
  let smoothedLatencyMs = null;

  function markDirty(id) {
    dirty.add(id);
  }

  function schedulePaint() {
    if (frameRequested || document.visibilityState === 'hidden') return;
    frameRequested = true;
    requestAnimationFrame(paintFrame);
  }

  function paintFrame() {
    frameRequested = false;
    if (document.visibilityState === 'hidden') return;
    const animate = !repaintAll && !(reducedMotion && reducedMotion.matches);
    const ids = repaintAll ? [...state.models.keys()] : [...dirty];
    if (repaintAll) {
      for (const [id, tile] of tiles) {
        if (!state.models.has(id)) { tile.el.remove(); tiles.delete(id); }
      }
    }
    for (const id of ids) paintTile(id, animate);
    if (repaintAll || membershipChanged) orderTiles();
    dirty.clear();
    repaintAll = membershipChanged = false;
    paintedVersion = state.version;
    ui.empty.hidden = state.version === null || state.models.size > 0;
    if (newestCommittedAt > 0 && !hiddenSinceCommit) {
      const sample = Date.now() - newestCommittedAt / 1000;
      smoothedLatencyMs = smoothedLatencyMs === null ? sample
        : smoothedLatencyMs + LATENCY_SMOOTHING * (sample - smoothedLatencyMs);
    }
    newestCommittedAt = 0;
    hiddenSinceCommit = false;
    renderStats();
  }

  function paintTile(id, animate) {
    const model = state.models.get(id);
    let tile = tiles.get(id);
    if (model === undefined) {
      if (tile) { tile.el.remove(); tiles.delete(id); }
      return;
    }
    if (!tile) {
      tile = createTile(id);
      tiles.set(id, tile);
      membershipChanged = true;
    }
    const fields = model !== null && typeof model === 'object' ? model : {};
    const label = typeof fields.label === 'string' || typeof fields.label === 'number'
      ? String(fields.label) : id;
    const color = safeColor(fields.color);
    if (tile.label.textContent !== label) tile.label.textContent = label;
    if (color !== tile.color) {
      tile.color = color;
      tile.el.style.backgroundColor = color || '';
      tile.el.dataset.ink = color ? inkFor(color) : 'muted';
      tile.el.classList.toggle('tile--blank', !color);
      tile.code.textContent = color || 'no color';
      if (animate && color) pulse(tile.el);
    }
    tile.el.setAttribute('aria-label', color ? `${label}, color ${color}` : `${label}, no color`);
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

  function orderTiles() {
    const ids = [...tiles.keys()].sort(collator.compare);
    const fragment = document.createDocumentFragment();
    for (const id of ids) fragment.append(tiles.get(id).el);
    ui.grid.append(fragment);
  }

  function pulse(el) {
    if (!el.animate) return;
    el.animate(
      [{ boxShadow: '0 0 0 3px var(--pulse)' }, { boxShadow: '0 0 0 0 transparent' }],
      { duration: 450, easing: 'ease-out' },
    );
  }

  function clearTiles() {
    for (const tile of tiles.values()) tile.el.remove();
    tiles.clear();
    dirty.clear();
    paintedVersion = null;
  }

  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') hiddenSinceCommit = true;
    else schedulePaint();
  });

  // ---- Messages ----------------------------------------------------------------------------

  /** Handles one decoded server message; returns false when the stream must be resynced. */
  function handleMessage(message) {
    if (!message || typeof message !== 'object') return true;
    if (message.store !== undefined && message.store !== state.store) return true;
    switch (message.type) {
      case 'snapshot':
        return applySnapshot(message);
      case 'subscribed':
        if (typeof message.version === 'number' && state.version === null) state.version = message.version;
        becameLive();
        return true;
      case 'changes':
        return applyChanges(message);
      case 'error':
        showToast(`The gateway says: ${message.message || message.code}`);
        if (message.code === 'no_such_store') connection.noSuchStore();
        return true;
      default:
        return true;
    }
  }

  function applySnapshot(message) {
    if (typeof message.version !== 'number' || !message.models || typeof message.models !== 'object') return true;
    state.models = new Map(Object.entries(message.models));
    state.version = message.version;
    if (typeof message.epoch === 'string') state.epoch = message.epoch;
    repaintAll = true;
    newestCommittedAt = 0;
    becameLive();
    schedulePaint();
    return true;
  }

  function applyChanges(message) {
    if (state.version === null || typeof message.version !== 'number') return true;
    if (message.conflated) {
      if (message.from !== state.version) return false;
    } else if (message.version <= state.version) {
      return true; // already applied (a replay overlapping what we have)
    } else if (message.version !== state.version + 1) {
      return false; // a version was skipped: resume from what we have
    }
    const changes = Array.isArray(message.changes) ? message.changes : [];
    for (const change of changes) {
      if (applyChange(change)) membershipChanged = true;
    }
    state.version = message.version;
    if (typeof message.committedAt === 'number') newestCommittedAt = Math.max(newestCommittedAt, message.committedAt);
    stats.counted(changes.length);
    schedulePaint();
    return true;
  }

  function becameLive() {
    connection.live();
  }

  // ---- Connection --------------------------------------------------------------------------
  //
  // One transport at a time. Every transport gets a generation number, and events from an older
  // generation are ignored, so a late close or message from a replaced socket changes nothing.

  const connection = (() => {
    let transport = params.get('transport') === 'sse' || typeof window.WebSocket !== 'function' ? 'sse' : 'ws';
    let generation = 0;
    let current = null; // {close()}
    let failures = 0; // attempts in a row that ended before going live
    let wsEverOpened = false;
    let wsFailuresBeforeOpen = 0;
    let everLive = false;
    let liveSince = null;
    let retryTimer = null;
    let retryAt = 0;
    let isLive = false;

    function start() {
      cancelRetry();
      const mine = ++generation;
      isLive = false;
      liveSince = null;
      setStatus(everLive ? 'reconnecting' : 'connecting', everLive ? 'Reconnecting…' : 'Connecting…');
      ui.transport.textContent = transport === 'ws' ? 'WebSocket' : 'SSE';
      current = transport === 'ws' ? openWebSocket(mine) : openEventSource(mine);
    }

    function stale(mine) {
      return mine !== generation;
    }

    function openWebSocket(mine) {
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      let socket;
      let opened = false;
      try {
        socket = new WebSocket(`${scheme}//${location.host}/ws${tokenQuery('?')}`, PROTOCOL);
      } catch (error) {
        queueMicrotask(() => lost(mine, false));
        return { close() {} };
      }
      socket.onopen = () => {
        if (stale(mine)) return;
        opened = true;
        wsEverOpened = true;
        const subscribe = { type: 'subscribe', store: state.store };
        if (state.version !== null) subscribe.since = state.version;
        if (state.epoch !== null) subscribe.epoch = state.epoch;
        socket.send(JSON.stringify(subscribe));
      };
      socket.onmessage = (event) => {
        if (stale(mine)) return;
        let message;
        try { message = JSON.parse(event.data); } catch { return; }
        if (!handleMessage(message)) resync(mine);
      };
      socket.onclose = () => { if (!stale(mine)) lost(mine, opened); };
      return { close() { socket.onclose = null; socket.close(1000); } };
    }

    function openEventSource(mine) {
      let url = `/api/stores/${encodeURIComponent(state.store)}/events`;
      if (state.version !== null) url += `?since=${state.version}`;
      if (state.version !== null && state.epoch !== null) url += `&epoch=${encodeURIComponent(state.epoch)}`;
      url += tokenQuery(url.includes('?') ? '&' : '?');
      const source = new EventSource(url);
      const onEvent = (event) => {
        if (stale(mine) || typeof event.data !== 'string') return;
        let message;
        try { message = JSON.parse(event.data); } catch { return; }
        if (!handleMessage(message)) resync(mine);
      };
      for (const name of ['snapshot', 'subscribed', 'changes']) source.addEventListener(name, onEvent);
      // EventSource would retry by itself, but without our backoff or status; take it over.
      source.onerror = () => {
        if (stale(mine)) return;
        source.close();
        lost(mine, true);
      };
      return { close() { source.close(); } };
    }

    function live() {
      if (isLive) return;
      isLive = true;
      everLive = true;
      failures = 0;
      liveSince = Date.now();
      setStatus('live', 'Live');
      jobs.refresh();
      stores.refresh();
    }

    /** The transport of generation `mine` ended; `opened` says whether it ever connected. */
    function lost(mine, opened) {
      if (stale(mine)) return;
      current = null;
      isLive = false;
      liveSince = null;
      if (transport === 'ws' && !opened && !wsEverOpened) {
        wsFailuresBeforeOpen += 1;
        if (wsFailuresBeforeOpen >= WS_FAILURES_BEFORE_SSE) {
          transport = 'sse';
          start();
          return;
        }
      }
      scheduleRetry();
    }

    /** A gap in the stream: drop the transport and resume from the last version applied. */
    function resync(mine) {
      if (stale(mine)) return;
      generation += 1;
      if (current) current.close();
      current = null;
      start();
    }

    function scheduleRetry() {
      cancelRetry();
      if (navigator.onLine === false) {
        setStatus('offline', 'Offline');
        ui.countdown.textContent = '';
        return; // the 'online' event resumes
      }
      const step = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(failures, 16));
      const delay = step / 2 + Math.random() * (step / 2);
      failures += 1;
      retryAt = Date.now() + delay;
      retryTimer = setTimeout(() => { retryTimer = null; start(); }, delay);
      setStatus('reconnecting', 'Reconnecting');
      renderCountdown();
    }

    function cancelRetry() {
      if (retryTimer !== null) clearTimeout(retryTimer);
      retryTimer = null;
      ui.countdown.textContent = '';
    }

    function renderCountdown() {
      if (retryTimer === null) return;
      const seconds = Math.max(1, Math.ceil((retryAt - Date.now()) / 1000));
      ui.countdown.textContent = `in ${seconds} s`;
    }

    /** Switches to another store: a fresh subscription and fresh state. */
    function switchTo(store) {
      generation += 1;
      if (current) current.close();
      current = null;
      failures = 0;
      everLive = false;
      state.store = store;
      state.models = new Map();
      state.version = null;
      state.epoch = null;
      clearTiles();
      stats.reset();
      renderStore();
      start();
    }

    function noSuchStore() {
      generation += 1;
      if (current) current.close();
      current = null;
      lost(generation, true);
      setStatus('offline', `No store named “${state.store}”`);
    }

    window.addEventListener('online', () => { if (!isLive) { failures = 0; start(); } });
    window.addEventListener('offline', () => {
      if (!isLive) { cancelRetry(); setStatus('offline', 'Offline'); }
    });

    return {
      start, live, switchTo, noSuchStore, renderCountdown,
      get transport() { return transport; },
      get liveSince() { return liveSince; },
    };
  })();

  function setStatus(status, text) {
    ui.status.dataset.status = status;
    if (ui.statusText.textContent !== text) ui.statusText.textContent = text;
  }

  // ---- Live panel --------------------------------------------------------------------------

  const stats = (() => {
    let counted = 0;
    let lastCounted = 0;
    let lastTick = performance.now();
    let perSecond = 0;
    return {
      counted(n) { counted += n; },
      reset() { counted = lastCounted = 0; perSecond = 0; smoothedLatencyMs = null; },
      tick() {
        const now = performance.now();
        const seconds = (now - lastTick) / 1000;
        if (seconds > 0) perSecond = (counted - lastCounted) / seconds;
        lastCounted = counted;
        lastTick = now;
      },
      get perSecond() { return perSecond; },
    };
  })();

  function renderStats() {
    ui.rate.textContent = formatRate(stats.perSecond);
    ui.version.textContent = paintedVersion === null ? '–' : String(paintedVersion);
    ui.latency.textContent = smoothedLatencyMs === null ? '–' : `${Math.max(0, Math.round(smoothedLatencyMs))} ms`;
    const since = connection.liveSince;
    ui.uptime.textContent = since === null ? '–' : formatDuration((Date.now() - since) / 1000);
    const count = state.models.size;
    ui.meta.textContent = state.version === null ? 'Waiting for the first snapshot'
      : `${count} ${count === 1 ? 'model' : 'models'} · version ${state.version}`;
  }

  function formatRate(value) {
    if (value >= 100) return String(Math.round(value));
    return value >= 10 ? value.toFixed(0) : value.toFixed(1).replace(/\.0$/, '');
  }

  function formatDuration(totalSeconds) {
    const s = Math.floor(totalSeconds);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const pad = (n) => String(n).padStart(2, '0');
    return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
  }

  setInterval(() => {
    stats.tick();
    connection.renderCountdown();
    if (document.visibilityState !== 'hidden') renderStats();
  }, 1000);

  // ---- HTTP API ----------------------------------------------------------------------------

  async function api(method, path, body) {
    const init = { method, headers: {} };
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

  // ---- Store picker ------------------------------------------------------------------------

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
    connection.switchTo(store);
    jobs.refresh();
  });
  ui.store.addEventListener('focus', () => stores.refresh());

  function renderStore() {
    ui.title.textContent = state.store;
    document.title = `${state.store} · Receptionist`;
    stores.render();
  }

  // ---- Animate job -------------------------------------------------------------------------

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

  // ---- Painting tiles by hand --------------------------------------------------------------

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
      await api('PATCH', `${storePath(state.store)}/models/${encodeURIComponent(el.dataset.model)}`, { color });
    } catch (error) {
      showToast(`Could not paint ${el.dataset.model}: ${error.message}`);
    }
  });

  // ---- Test and debugging hook (read-only) -------------------------------------------------

  window.receptionistViewer = Object.freeze({
    /** A copy of the models as last applied: {id: model}. */
    state: () => JSON.parse(JSON.stringify(Object.fromEntries(state.models))),
    version: () => state.version,
    paintedVersion: () => paintedVersion,
    status: () => ui.status.dataset.status,
    transport: () => connection.transport,
    store: () => state.store,
  });

  renderStore();
  renderStats();
  connection.start();
  stores.refresh();
  jobs.refresh();
})();
