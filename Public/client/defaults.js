// The client's defaults, and the WebSocket subprotocol it speaks.

export const PROTOCOL = 'receptionist.v1';

export const DEFAULTS = Object.freeze({
  backoffBaseMs: 500,
  backoffMaxMs: 15000,
  // WebSocket attempts in a row that fail before ever opening, after which transport 'auto'
  // switches to SSE (a proxy that refuses upgrades fails every time; one that opened once is just down).
  fallbackAfter: 3,
  // The most a `draining` message may make the client wait before it reconnects.
  maxDrainDelayMs: 30000,
  // Commits sent and not yet answered; past it `commit()` refuses at once.
  maxPendingCommits: 1000,
});
