import ReceptionistModel
import ReceptionistPush

/// Where topics' messages are numbered and kept: the one seam every way of publishing goes
/// through (`TopicPublisher`), whatever the engine. `MemoryTopicLog` numbers in the hub at once;
/// `DiskTopicLog` numbers here and answers once the message is on disk; the cluster's
/// (`ClusterTopicLog`) answers once Redis numbered it and this node has it.
///
/// Loop thread only.
protocol TopicLog: AnyObject {
    /// Whether `publish` always answers before it returns (the reply need not wait).
    var answersAtOnce: Bool { get }
    /// Why `topic` cannot take a message now (it would be a topic past `--max-topics`, or its
    /// Redis server is down), or nil.
    func refusal(for topic: String) -> StoreError?
    /// Numbers `data` (compact JSON text, the publisher's bytes) as the next message of `topic`
    /// and keeps it; `done` runs on the loop, once, with its number, after it is in this node's
    /// history and queued to every subscriber.
    func publish(_ topic: String, data: [UInt8], done: @escaping (Result<UInt64, StoreError>) -> Void)
    /// Reads the messages `after + 1 ... through` of `topic` that the log keeps beyond this node's
    /// history (the cluster's log in Redis); `done` runs once, on the loop, with what it found
    /// (nothing when the log could not be read in time). False, and no call, when the log keeps
    /// nothing beyond the history (memory, disk).
    func older(_ topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]) -> Void) -> Bool
    /// Whether topics live beyond this node (a cluster's log in Redis): one this node does not
    /// hold may still exist, and `readIn` makes this node's copy of it.
    var isShared: Bool { get }
    /// Makes this node's copy of `topic`, which it does not hold, from the shared log (a cluster
    /// node that does not follow the topic reads it from Redis); `done` runs once, on the loop,
    /// with the copy, or nil when it could not be read in time. Only where `isShared`.
    func readIn(_ topic: String, done: @escaping (Topic?) -> Void)
    /// Lets go of what the log keeps of `topic`, which the hub forgets next (quiet for
    /// `--topic-ttl`); false keeps the topic until the next sweep.
    func release(_ topic: Topic) -> Bool
}

extension TopicLog {
    func older(_ topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]) -> Void) -> Bool { false }
    var isShared: Bool { false }
    func readIn(_ topic: String, done: @escaping (Topic?) -> Void) { done(nil) }
}

/// The `memory` engine's topics: numbered and kept in the hub, answered at once.
final class MemoryTopicLog: TopicLog {
    private let hub: PushHub

    init(hub: PushHub) {
        self.hub = hub
    }

    var answersAtOnce: Bool { true }

    func refusal(for topic: String) -> StoreError? {
        hub.capacityRefusal(forTopic: topic).map { .overCapacity($0) }
    }

    func release(_ topic: Topic) -> Bool { true }

    func publish(_ topic: String, data: [UInt8], done: @escaping (Result<UInt64, StoreError>) -> Void) {
        done(hub.publish(topic: topic, data: data, publishedAt: Clock.microsecondsSinceEpoch()).mapError {
            .unavailable($0.message)
        })
    }
}
