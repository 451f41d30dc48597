import ReceptionistModel
import ReceptionistPush

/// The `redis` engine's topics: Redis numbers each message; the answer waits on the loop until
/// this node has it too, or the deadline passes. Nothing waits meanwhile, and publishes sent in
/// one loop iteration go to Redis in one write (the connection pipelines them).
///
/// Loop thread only.
final class ClusterTopicLog: TopicLog {
    private let cluster: ClusterEngine

    init(cluster: ClusterEngine) {
        self.cluster = cluster
    }

    var answersAtOnce: Bool { false }

    func refusal(for topic: String) -> StoreError? {
        cluster.isUp(for: topic) ? nil : .unavailable("Redis \(cluster.shard(topic).endpoint) is unreachable")
    }

    func older(_ topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]) -> Void) -> Bool {
        cluster.history(of: topic, after: after, through: through) { done($0 ?? []) }
        return true
    }

    func publish(_ topic: String, data: [UInt8], done: @escaping (Result<UInt64, StoreError>) -> Void) {
        // Redis numbers the message, then this node must read it back: either may never come
        // (Redis gone between the two).
        LoopDeadline.run(
            cluster.loop, seconds: cluster.timeoutSeconds,
            timedOut: { .failure(.outcomeUnknown("Redis did not answer in time; the message may or may not be published")) },
            { [cluster] in cluster.publish(topic: topic, data: data, completion: $0) }, done: done)
    }
}
