import ReceptionistModel
import ReceptionistPush

/// The `redis` engine's topics: Redis numbers each message; the answer waits on the loop until
/// this node has it too, or the deadline passes. Nothing waits meanwhile, and the publishes of
/// one loop iteration go to Redis in one write, as few script calls as their bounds allow
/// (`PublishBatcher`).
///
/// Loop thread only.
final class ClusterTopicLog: TopicLog {
    private let cluster: ClusterEngine

    init(cluster: ClusterEngine) {
        self.cluster = cluster
    }

    var answersAtOnce: Bool { false }

    func refusal(for topic: String) -> StoreError? {
        if let refusal = cluster.hub.capacityRefusal(forTopic: topic) { return .overCapacity(refusal) }
        return cluster.isUp(for: topic) ? nil : .unavailable(cluster.shard(topic).refusal)
    }

    func older(_ topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]) -> Void) -> Bool {
        cluster.history(of: topic, after: after, through: through) { done($0 ?? []) }
        return true
    }

    var isShared: Bool { true }

    func readIn(_ topic: String, done: @escaping (Topic?) -> Void) {
        guard refusal(for: topic) == nil else { return done(nil) }
        // Made here, the topic is mirrored from Redis (`watchTopic`) and synced once read.
        let copy = cluster.hub.topic(topic)
        let hub = cluster.hub
        LoopDeadline.run(cluster.loop, seconds: cluster.timeoutSeconds, timedOut: { nil }, { answer in
            if !hub.whenSynced(copy, { answer(copy) }) { answer(nil) }
        }, done: done)
    }

    func release(_ topic: Topic) -> Bool {
        cluster.stopMirroring(topic.name)
    }

    func publish(_ topic: String, data: [UInt8], done: @escaping (Result<UInt64, StoreError>) -> Void) {
        // Redis numbers the message, then this node must have it too: either may never come
        // (Redis gone between the two), so the batch's deadline answers it then.
        cluster.publish(topic: topic, data: data, completion: done)
    }
}
