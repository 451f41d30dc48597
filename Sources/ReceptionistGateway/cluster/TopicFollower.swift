import Logging
import ReceptionistModel
import ReceptionistPush

/// Mirrors one topic's Redis stream into the hub's `Topic`, in stream order, and answers the
/// publishes this node made once it has them too.
///
/// A `StreamCursor` checks the numbers follow on: numbers trimmed before this node read them
/// reach its subscribers as one `gap`; numbers that went back (Redis lost its data) restart the
/// topic.
///
/// Loop thread only.
final class TopicFollower: StreamFollower {
    let name: String
    private unowned let hub: PushHub
    private let logger: Logger
    /// Publishes from this node waiting until the mirror reaches their number.
    private var waiters: [(seq: UInt64, completion: (Result<UInt64, StoreError>) -> Void)] = []

    init(name: String, hub: PushHub, logger: Logger) {
        self.name = name
        self.hub = hub
        self.logger = logger
    }

    /// Calls `completion` once the mirror has message `seq` (at once if it has).
    func waitFor(_ seq: UInt64, reader: StreamReader, _ completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        if let cursor = reader.cursor, cursor.lastNumber >= seq { return completion(.success(seq)) }
        waiters.append((seq, completion))
    }

    /// A topic is mirrored on the loop as it is read: it is never behind.
    var acceptsMore: Bool { true }

    func follow(_ entries: [StreamEntry], reader: StreamReader) {
        let topic = hub.topic(name)
        var cursor = reader.cursor ?? StreamCursor()
        for entry in entries {
            guard let seq = entry.number("s") else { continue }
            let publishedAt = entry.number("t") ?? 0
            let data = entry.fields["d"] ?? Array("null".utf8)
            switch cursor.accept(id: entry.id, number: seq) {
            case .next:
                topic.mirror(seq: seq, publishedAt: publishedAt, data: data)
            case .gap(let from, let to):
                topic.skip(from: from, to: to)
                topic.mirror(seq: seq, publishedAt: publishedAt, data: data)
            case .duplicate:
                break
            case .regressed:
                logger.error("topic numbering went back: did Redis lose its data?", metadata: ["topic": "\(name)", "seq": "\(seq)"])
                topic.restart(seq: seq, publishedAt: publishedAt, data: data)
            }
        }
        reader.cursor = cursor
        let done = waiters.filter { $0.seq <= cursor.lastNumber }
        waiters.removeAll { $0.seq <= cursor.lastNumber }
        for waiter in done { waiter.completion(.success(waiter.seq)) }
    }

    func caughtUp(_ reader: StreamReader) {
        markSynced()
    }

    /// Redis is down: serve subscribers from what this node has; the catch-up on reconnection
    /// brings the rest, with a gap notice for anything trimmed meanwhile.
    func unreachable(_ reader: StreamReader) {
        markSynced()
    }

    /// A topic's cursor starts at the stream's beginning; there is no state to read whole.
    func resync(_ reader: StreamReader, done: @escaping (StreamCursor?) -> Void) {
        done(StreamCursor())
    }

    private func markSynced() {
        let topic = hub.topic(name)
        if !topic.isSynced { hub.topicSynced(topic) }
    }
}
