/// How the disk engine keeps the gateway's stores and topics (`--data-dir` and its options).
public struct DiskOptions: Sendable {
    /// When a write is acknowledged.
    public enum Fsync: String, Sendable, CaseIterable {
        /// Once it is on disk (fsync), shared by every write waiting together.
        case always
        /// Once it is written to the operating system; synced at most every `intervalSeconds`.
        case interval
    }

    public var directory: String
    public var fsync: Fsync
    public var intervalSeconds: Double
    /// Change sets kept per store (older ones are compacted away).
    public var retain: Int
    /// Change sets kept by the store of a name: its namespace's, or `retain`.
    public var retainOf: @Sendable (String) -> Int
    /// Messages kept per topic.
    public var topicHistory: Int
    /// Writes waiting for the writer thread, at most: past it a store's committer waits and a
    /// topic's publish is refused.
    public var maxQueued: Int
    /// Bytes of topic messages waiting for the writer, at most: past it a publish is refused,
    /// as past `maxQueued` (a stalled disk and 1 MiB messages filled memory by the gigabyte
    /// before the count refused one).
    public var maxQueuedMessageBytes = 64 << 20
    /// Stored batches whose change sets wait for the notifier (their observers), at most: past it
    /// the writer waits, so a blocked observer holds the disk back and never grows memory.
    public var maxUnsettledBatches = 64
    /// Idempotency keys are kept this long from their first use (`--idempotency-window`), at
    /// most `maxIdempotencyKeys` of them (`--idempotency-keys`), the oldest pruned first.
    public var idempotencyWindowSeconds: Double = 300
    public var maxIdempotencyKeys = 100_000
    /// Where this boot of the machine is named (`DiskSchema.bootID`); another file only in tests.
    public var bootIDFile = "/proc/sys/kernel/random/boot_id"
    /// Told, on the writer thread, when writes fail (with why) and when they are stored again
    /// (nil), as `FailureLog` decides: not for every write, so a full disk is seen in the log.
    public var reportFailing: @Sendable (String?) -> Void = { _ in }

    public init(
        directory: String, fsync: Fsync = .always, intervalSeconds: Double = 1, retain: Int = 100_000,
        topicHistory: Int = 1000, maxQueued: Int = 65_536
    ) {
        self.directory = directory
        self.fsync = fsync
        self.intervalSeconds = intervalSeconds
        self.retain = max(1, retain)
        let kept = max(1, retain)
        retainOf = { _ in kept }
        self.topicHistory = max(0, topicHistory)
        self.maxQueued = max(1, maxQueued)
    }
}

/// Why the data directory cannot be used; the gateway refuses to start with it.
public struct DiskError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
