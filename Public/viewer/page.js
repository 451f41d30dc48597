// The page: its elements (index.html), and what its URL asks for (`?store=`, `?token=`, `?transport=`).

const $ = (id) => document.getElementById(id);
export const ui = {
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

export const params = new URLSearchParams(location.search);

// A page given a token (`?token=`) subscribes and writes with it.
export const token = params.get('token') || undefined;
