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
        // Redis numbers the message, then this node must read it back: either may never come
        // (Redis gone between the two). The client hears within the deadline either way, once.
        let answer = Answer(done)
        var deadline: LoopTimer?
        deadline = LoopTimer(loop: cluster.loop) {
            deadline?.close()
            deadline = nil
            answer.give(.failure(Problem(
                .unavailable, "Redis did not answer in time; the message may or may not be published")))
        }
        deadline?.start(delayMilliseconds: UInt64(RedisStoreReplication.timeoutSeconds * 1000))
        cluster.publish(topic: topic, data: data) { result in
            deadline?.close()
            deadline = nil
            answer.give(result.mapError { Problem(.unavailable, $0.description) })
        }
    }

    /// An answer given at most once: by Redis, or by the deadline, whichever comes first.
    private final class Answer {
        private var done: ((Result<UInt64, Problem>) -> Void)?
        init(_ done: @escaping (Result<UInt64, Problem>) -> Void) { self.done = done }

        func give(_ result: Result<UInt64, Problem>) {
            let done = self.done
            self.done = nil
            done?(result)
        }
    }
}
