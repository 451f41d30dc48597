// The errors the client reports: the gateway's refusals, and what publish() and commit() reject with.

export {}; // only the names marked `export` below are exported

/** An error the gateway answered: its code (`no_such_store`, `forbidden`, …) and message. */
export interface GatewayError {
  code: string;
  message: string;
}

/**
 * What `publish()` rejects with when the gateway refuses or cannot answer: an `Error` whose `code`
 * and `status` are the gateway's (`forbidden`, `unauthorized`, `too_many_requests`, …; `code` is
 * `'unavailable'` when the answer holds no error code, and also, with `status` 0, when no answer
 * came within the client's `requestTimeoutMs`: whether it was published is then unknown). A bad
 * topic name or a `data` that is not JSON rejects with a `TypeError` instead, and so does a
 * request that could not be made (the one `fetch` gives).
 */
export interface PublishError extends Error {
  /** The gateway's error code (`forbidden`, `too_many_requests`, …), or `'unavailable'`. */
  code: string;
  /** The HTTP status of the answer; 0 when none came in time. */
  status: number;
}

/**
 * What `commit()` rejects with: an `Error` whose `code` is the gateway's (`forbidden`,
 * `unauthorized`, `precondition_failed`, `no_such_store`, `bad_message`, `rate_limited`), or
 * `'unavailable'` when the backend's hook did not answer, the connection closed before the answer
 * or none came within the client's `requestTimeoutMs` (the outcome is then unknown), the
 * WebSocket did not open within that time (nothing was sent), or the client is closed or uses SSE. `bad_message` also comes at once, with nothing
 * sent, for changes the gateway could not read (a value JSON cannot hold, nesting past 256
 * levels, a lone UTF-16 surrogate). `version` is the store's version, for `precondition_failed`.
 */
export interface CommitError extends Error {
  code: string;
  version?: number;
}

// ---- What errors.js exports (not exported by the module) ----------------------------------

/** The codes of the refusals that a retry cannot cure: the request itself is wrong. */
export declare const PERMANENT_ERRORS: ReadonlySet<string>;

/** The codes of the refusals that a fresh token may cure. */
export declare const TOKEN_ERRORS: ReadonlySet<string>;
