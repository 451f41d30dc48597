import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// The one door through which a topic message is published, whoever sends it: an HTTP request,
/// a batch, or a WebSocket client. It counts the publish rate (per API key, token or address),
/// and numbers the message here (one node) or through Redis (a cluster), answering on the loop
/// once the message is in this node's history.
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
        cluster.publish(topic: topic, data: data) { result in
            done(result.mapError { Problem(.unavailable, $0.description) })
        }
    }
}
