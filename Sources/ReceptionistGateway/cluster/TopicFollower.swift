import Logging
import ReceptionistLoop
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
    private unowned let commands: RedisConnection
    private let keys: ClusterKeys
    /// How many of the newest messages to mirror on first hearing of the topic: its history.
    private let tail: Int
    private let logger: Logger
    /// Publishes from this node waiting until the mirror reaches their number.
    private var waiters: [(seq: UInt64, completion: (Result<UInt64, StoreError>) -> Void)] = []

    init(name: String, hub: PushHub, commands: RedisConnection, keys: ClusterKeys, tail: Int, logger: Logger) {
        self.name = name
        self.hub = hub
        self.commands = commands
        self.keys = keys
        self.tail = max(1, tail)
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

    /// On first hearing of the topic: its number and its newest messages, read together, so the
    /// mirror starts with this node's history full and goes on from the newest entry; older
    /// messages stay in Redis for resumes that need them (`ClusterEngine.history`).
    func resync(_ reader: StreamReader, done: @escaping (StreamCursor?) -> Void) {
        let sent = commands.send(["EVAL", ClusterScripts.topicTail, "2", keys.topicSeq(name), keys.topicLog(name), String(tail)]) {
            [self] reply in
            guard let parts = reply?.elements, parts.count == 2, let seq = parts[0].integer, seq >= 0 else {
                unreachable(reader)
                return done(nil)
            }
            let entries = Array(StreamEntry.parse(range: parts[1]).reversed())
            let topic = hub.topic(name)
            // The mirror starts just before the oldest entry read (or at the number, if the log
            // is empty): what came before is not in this node's history, as on a node that trims.
            let first = entries.first?.number("s") ?? UInt64(seq) + 1
            if first > topic.seq + 1 { topic.skip(from: topic.seq + 1, to: first - 1) }
            reader.cursor = StreamCursor(lastID: "0-0", lastNumber: first - 1)
            follow(entries, reader: reader)
            done(reader.cursor)
        }
        if !sent {
            unreachable(reader)
            done(nil)
        }
    }

    private func markSynced() {
        let topic = hub.topic(name)
        if !topic.isSynced { hub.topicSynced(topic) }
    }
}
