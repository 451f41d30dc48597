// LIMITS (limits.js): the gateway's limits on a subscription's options.

/**
 * The limits a subscription's options keep: the gateway's own (docs/PROTOCOL.md, "Limits"). An
 * option past one throws a `TypeError` before anything is sent.
 */
export declare const LIMITS: Readonly<{
  maxModels: number;
  maxPaths: number;
  minRate: number;
  maxRate: number;
  maxEpochBytes: number;
  maxSince: number;
  maxRefBytes: number;
}>;
