// The client's defaults, and the WebSocket subprotocol it speaks.

export const PROTOCOL = 'receptionist.v1';

export const DEFAULTS = Object.freeze({
  backoffBaseMs: 500,
  backoffMaxMs: 15000,
  // WebSocket attempts in a row that fail before ever opening while the gateway answers plain
  // HTTP, after which transport 'auto' switches to SSE (a proxy that refuses upgrades fails every
  // time; an address that answers nothing is just down, and is tried again over WebSocket).
  fallbackAfter: 3,
  // How long a connection attempt may take, the token included: a WebSocket until it opens, an
  // event stream until its answer's head. Past it the attempt has failed and the backoff goes on.
  connectTimeoutMs: 10000,
  // How long a commit, an RPC or a publish may wait for its answer (a commit or an RPC made while
  // the WebSocket is not open, for it to open too); past it, it rejects with `unavailable`.
  requestTimeoutMs: 30000,
  // After this long with no frame received on an open WebSocket the client sends a `ping` (0: never),
  // and takes a connection that sends nothing within heartbeatTimeoutMs after it as lost.
  heartbeatMs: 20000,
  heartbeatTimeoutMs: 10000,
  // The most a `draining` message may make the client wait before it reconnects.
  maxDrainDelayMs: 30000,
  // Commits and RPCs waiting (to be sent, or for their answer); past it a call refuses at once.
  maxPendingCommits: 1000,
  // A token that looks due already (a client clock ahead of the gateway's) is renewed after this
  // long, doubled while that lasts, up to maxRenewalDelayMs.
  minRenewalMs: 1000,
  maxRenewalDelayMs: 30000,
});

/** The longest delay a timer takes (a longer one fires at once). */
export const MAX_TIMER_MS = 2_147_483_647;
