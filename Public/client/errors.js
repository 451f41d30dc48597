// Which of the gateway's refusals a retry may cure, and which it cannot.

// Refusals that a retry cannot cure: the request itself is wrong.
export const PERMANENT_ERRORS = new Set(['bad_message', 'invalid_topic', 'unknown_type']);
// Refusals that a fresh token may cure; the retry presents the token again first.
export const TOKEN_ERRORS = new Set(['unauthorized', 'forbidden', 'token_invalid', 'token_expired']);
