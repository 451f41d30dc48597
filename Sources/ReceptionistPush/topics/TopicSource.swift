/// Where a cluster node's topics come from: the engine that mirrors them from a shared log.
///
/// With one, a topic the hub creates starts unsynced until the source has read its history, and
/// a resume from a number this node has not reached yet waits for it instead of starting over.
///
/// Loop thread only.
public protocol TopicSource: AnyObject {
    /// Starts mirroring `name`; the source calls `PushHub.topicSynced` once it has read it.
    func watchTopic(_ name: String)

    /// The messages `after + 1 ... through` of `topic` that the shared log still holds, oldest
    /// first, for a resume older than this node's history; `done` runs once, on the loop, with
    /// nil when the log could not be read (in time).
    func history(of topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]?) -> Void)
}

/// One message of a topic as the shared log keeps it.
public struct TopicEntry: Sendable, Equatable {
    public let seq: UInt64
    /// Microseconds since the Unix epoch.
    public let publishedAt: UInt64
    /// JSON text, as published.
    public let data: [UInt8]

    public init(seq: UInt64, publishedAt: UInt64, data: [UInt8]) {
        self.seq = seq
        self.publishedAt = publishedAt
        self.data = data
    }
}
