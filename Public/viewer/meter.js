// Meter: a view's traffic (frames, bytes and changes per second) and its staleness.
//
// Frames and bytes as the subscription received them, and staleness: at each paint, the time
// from the commit of the oldest change it shows (a coalesced frame's `firstCommittedAt`) to the
// paint. Commit times are the gateway's wall clock in microseconds; the page's clock is assumed
// to agree with it (the same machine, or clocks kept in sync).

const SHARE_WINDOW_SECONDS = 5;

export class Meter {
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
