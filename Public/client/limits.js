// LIMITS: the gateway's limits on a subscription's options, kept by the client too.

/**
 * The limits a subscription's options keep: the gateway's own (docs/PROTOCOL.md, "Limits"), so
 * that what the gateway would refuse for good is refused here, before anything is sent.
 * Tests/e2e/test_limits.py holds this table, the gateway's and the document's equal.
 */
export const LIMITS = Object.freeze({
  maxModels: 1024, // model ids one store subscription may list
  maxPaths: 64, // key paths one store subscription may list
  minRate: 0.01, // the slowest maxRate: a frame in 100 s
  maxRate: 1000, // the fastest maxRate
  maxEpochBytes: 64, // bytes of a store epoch
  maxSince: Number.MAX_SAFE_INTEGER, // the highest since: 2^53 - 1
  maxRefBytes: 64, // bytes of a commit's ref or an RPC's id
});
