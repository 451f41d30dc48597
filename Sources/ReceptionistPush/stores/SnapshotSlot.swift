/// The snapshot event last built for a store, while its version stands. A store's unfiltered
/// groups (options that differ only in `maxRate` or `old`) share one: they send the same
/// snapshot, and a hundred of them held a hundred copies of a large store, each with its frames.
/// A filtered group keeps its own.
///
/// The loop's thread only.
final class SnapshotSlot {
    var cached: (version: UInt64, reset: Bool, event: PushEvent)?
}
