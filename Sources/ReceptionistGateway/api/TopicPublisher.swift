import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// Publishes a WebSocket client's messages, numbering each here (one node) or through Redis (a
/// cluster) and answering on the loop once the message is in this node's history; and holds the
/// publish rate (per API key, token or address) that every way of publishing shares, HTTP
/// included.
///
/// Loop thread only.
final class TopicPublisher {
    let hub: PushHub
    /// The `redis` engine, which numbers every message when the gateway is one node of a cluster.
    let cluster: ClusterEngine?
    /// Publishes per second per key, for every way in (`--publish-rate`).
    let limiter: KeyedRateLimiter

    typealias Problem = ClientMessage.Problem

    init(hub: PushHub, cluster: ClusterEngine?, rate: RateLimit) {
        self.hub = hub
        self.cluster = cluster
        limiter = KeyedRateLimiter(limit: rate)
    }

    /// Publishes `data` (compact JSON text, the publisher's bytes) to `topic`. `done` runs on the
    /// loop: at once on one node, when Redis has numbered it in a cluster.
    func publish(_ topic: String, data: [UInt8], done: @escaping (Result<UInt64, Problem>) -> Void) {
        if let problem = hub.check(.topic(topic)) { return done(.failure(problem)) }
        guard let cluster else {
            return done(hub.publish(topic: topic, data: data, publishedAt: Clock.microsecondsSinceEpoch()))
        }
        publish(topic, data: data, through: cluster) { result in
            done(result.mapError { Problem(.unavailable, $0.description) })
        }
    }

    /// Publishes through Redis from the loop: `done` runs on the loop once Redis has numbered
    /// the message and this node has it too, or with the error, within the deadline either way,
    /// once. Nothing waits meanwhile, and publishes sent in one loop iteration go to Redis in one
    /// write (the connection pipelines them).
    func publish(
        _ topic: String, data: [UInt8], through cluster: ClusterEngine, done: @escaping (Result<UInt64, StoreError>) -> Void
    ) {
        // Redis numbers the message, then this node must read it back: either may never come
        // (Redis gone between the two).
        LoopDeadline.run(
            cluster.loop, seconds: cluster.timeoutSeconds,
            timedOut: { .failure(.outcomeUnknown("Redis did not answer in time; the message may or may not be published")) },
            { cluster.publish(topic: topic, data: data, completion: $0) }, done: done)
    }
}
