import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// Publishes a WebSocket client's messages through the engine's `TopicLog`, answering on the loop
/// once the message is in this node's history; and holds the publish rate (per API key, token or
/// address) that every way of publishing shares, HTTP included.
///
/// Loop thread only.
final class TopicPublisher {
    let hub: PushHub
    /// Where messages are numbered and kept: memory, disk or Redis.
    let log: any TopicLog
    /// Publishes per second per key, for every way in (`--publish-rate`).
    let limiter: KeyedRateLimiter

    typealias Problem = ClientMessage.Problem

    init(hub: PushHub, log: any TopicLog, rate: RateLimit) {
        self.hub = hub
        self.log = log
        limiter = KeyedRateLimiter(limit: rate)
    }

    /// Publishes `data` (compact JSON text, the publisher's bytes) to `topic`. `done` runs on the
    /// loop, once the engine has the message.
    func publish(_ topic: String, data: [UInt8], done: @escaping (Result<UInt64, Problem>) -> Void) {
        if let problem = hub.check(.topic(topic)) { return done(.failure(problem)) }
        if let refusal = log.refusal(for: topic) { return done(.failure(Problem(.unavailable, refusal.description))) }
        log.publish(topic, data: data) { result in
            done(result.mapError { Problem(.unavailable, $0.description) })
        }
    }
}
