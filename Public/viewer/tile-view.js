// TileView: one store subscription as a grid of tiles, painted once per animation frame.
//
// A view shows one store subscription. Frames update the subscription's models as they arrive;
// the DOM follows in one requestAnimationFrame callback, so everything that arrived within a
// frame (an atomic change set always among it) is painted together. While the tab is hidden
// nothing is painted: the dirty set keeps only ids, so it never grows past the size of the store,
// and one paint catches up when shown. A view can be pinned to a past version of the store (the
// history scrubber): the tiles then show that version, marked where it differs from the live
// models, while frames keep updating the live models underneath.

import { sameValue } from '../viewer-history.js';
import { inkFor, safeColor } from './colors.js';
import { collator } from './format.js';
import { Meter } from './meter.js';

const reducedMotion = window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)');

export class TileView {
  constructor({ grid, empty, compact, onPaint }) {
    this.grid = grid;
    this.empty = empty;
    this.emptyText = empty.textContent; // what the notice says of the live store
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

  /** The ids of the live models that the pinned version does not have: created since. */
  get created() {
    if (!this.pinned) return [];
    return [...this.models.keys()].filter((id) => !this.pinned.models.has(id));
  }

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
    // Pinned, the notice is about that version: the live store may have models by now.
    const emptyText = this.pinned ? `This store had no models at version ${this.pinned.version}.` : this.emptyText;
    if (this.empty.textContent !== emptyText) this.empty.textContent = emptyText;
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

  /**
   * Puts the tiles in id order, moving only those out of place. A moved element loses keyboard
   * focus, and the tiles already shown are in order among themselves (an id never changes), so
   * in practice only new tiles move. Should the focused tile have to move anyway, it gets focus
   * back, without scrolling.
   */
  orderTiles() {
    const ids = [...this.tiles.keys()].sort(collator.compare);
    const active = document.activeElement;
    const focused = active && active !== this.grid && this.grid.contains(active) ? active : null;
    let next = this.grid.firstElementChild;
    for (const id of ids) {
      const { el } = this.tiles.get(id);
      if (el === next) next = next.nextElementSibling;
      else this.grid.insertBefore(el, next);
    }
    if (focused && focused.isConnected && document.activeElement !== focused) focused.focus({ preventScroll: true });
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
