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
    /// Publishes from this node waiting until the mirror reaches their number, with when each
    /// began. Each publish is answered by its own deadline (`--redis-timeout`) if its number never
    /// comes (an epoch this node never reads, say); its entry is dropped once that has passed, so
    /// the list holds at most the publishes of one time-out.
    private var waiters: [(seq: UInt64, epoch: String, since: UInt64, completion: (Result<UInt64, StoreError>) -> Void)] = []
    private let waitMilliseconds: UInt64
    /// An epoch for a topic new to Redis, of the server's present life (`RedisLife`).
    private let freshEpoch: () -> String
    /// Batches of this node's own publishes sent and not answered yet. A notice that comes
    /// meanwhile (on the other connection, often before the answer: its own batch's) waits for
    /// them in `heldNotice`, since the answers may bring its messages without a read.
    private var ownInFlight = 0
    private var heldNotice: (seq: UInt64, epoch: String, id: String?)?
    /// The epochs that may not be the topic's: the one whose log was seen going back (a number
    /// after one this node had read; Redis came back with older data), and the last few this node
    /// left (seen again, Redis went back past a renewal). The next read of the tail renews such an
    /// epoch in Redis, once for every node.
    private var retired = RetiredEpochs()
    private let channel: String
    /// How long the topic's keys live in Redis from the tail's read (`RedisHistory.topicKeysMilliseconds`).
    private let keysMilliseconds: Int
    /// When (the loop's milliseconds) this node last renewed the topic's keys in Redis, by a
    /// publish or while a subscriber here followed it (`ClusterEngine.renewFollowedTopics`); nil:
    /// not yet.
    private var keysRenewedAt: UInt64?

    /// Whether this node should renew the topic's keys now: it last did `every` ms ago or more, or
    /// never (`.max`: once). If so, now counts as done.
    func renewingKeys(now: UInt64, every: UInt64) -> Bool {
        if let last = keysRenewedAt, every == .max || now < last + every { return false }
        keysRenewedAt = now
        return true
    }

    init(
        name: String, hub: PushHub, commands: RedisConnection, keys: ClusterKeys, tail: Int, waitMilliseconds: UInt64,
        keysMilliseconds: Int = 0, freshEpoch: @escaping () -> String = ModelStore.newEpoch, logger: Logger
    ) {
        self.freshEpoch = freshEpoch
        self.keysMilliseconds = keysMilliseconds
        channel = keys.channel
        self.waitMilliseconds = waitMilliseconds
        self.name = name
        self.hub = hub
        self.commands = commands
        self.keys = keys
        self.tail = max(1, tail)
        self.logger = logger
    }

    /// Calls `completion` once the mirror has message `seq` of `epoch` (at once if it has). A
    /// message of an epoch the mirror has not reached yet waits for it: the log started over.
    func waitFor(
        _ seq: UInt64, epoch: String, reader: StreamReader, _ completion: @escaping (Result<UInt64, StoreError>) -> Void
    ) {
        if epoch == hub.topic(name).epoch, let cursor = reader.cursor, cursor.lastNumber >= seq { return completion(.success(seq)) }
        let now = commands.loop.nowMilliseconds
        if let oldest = waiters.first, oldest.since + waitMilliseconds < now {
            waiters.removeAll { $0.since + waitMilliseconds < now }
        }
        waiters.append((seq, epoch, now, completion))
    }

    /// Messages to the topic from one script call, as Redis numbered them: this node's own, from
    /// the call's answer, or another node's, carried by its notice. Mirrored now if they are the
    /// next messages of the epoch this node follows, so each is answered (or delivered) after one
    /// round trip and no read; the cursor moves past the last, and a read already in flight that
    /// returns them finds them duplicates. Otherwise (messages in between that this node has not
    /// read yet) they are left to the read.
    func mirror(_ messages: [PublishBatch.Message], numbered: PublishBatch.Numbered, reader: StreamReader) -> Bool {
        let topic = hub.topic(name)
        // The numbers follow on, and so does the log: the entry before them is the last this node
        // read (not another log numbered on from older data Redis came back with).
        guard topic.isSynced, numbered.epoch == topic.epoch, let cursor = reader.cursor, cursor.lastNumber + 1 == numbered.first,
              numbered.previousID.map({ $0 == cursor.lastID }) ?? true
        else { return false }
        for (offset, message) in messages.enumerated() {
            topic.mirror(seq: numbered.first + UInt64(offset), publishedAt: message.publishedAt, data: message.data)
        }
        let moved = StreamCursor(lastID: numbered.lastID, lastNumber: numbered.first + UInt64(messages.count) - 1)
        reader.cursor = moved
        settleWaiters(upTo: moved, epoch: topic.epoch)
        return true
    }

    /// A batch of this node's publishes to the topic was sent.
    /// Whether nothing of this node's waits on the topic: no publish sent or waiting for its
    /// number, no notice held.
    var isIdle: Bool { waiters.isEmpty && ownInFlight == 0 && heldNotice == nil }

    func ownSent() {
        ownInFlight += 1
    }

    /// A batch of this node's publishes was answered (or lost); once none is left, a notice that
    /// came meanwhile is read for, unless the answers brought its message.
    func ownAnswered(reader: StreamReader) {
        ownInFlight -= 1
        guard ownInFlight == 0, let notice = heldNotice else { return }
        heldNotice = nil
        if !has(notice.seq, epoch: notice.epoch, id: notice.id, reader: reader) { read(for: notice.epoch, reader) }
    }

    /// Reads for a notice of `epoch`: the tail again if the topic follows another epoch (a new
    /// one has no entry to read yet, when a script renewed it).
    private func read(for epoch: String, _ reader: StreamReader) {
        let topic = hub.topic(name)
        if topic.isSynced, epoch != topic.epoch { reader.cursor = nil }
        reader.read()
    }

    /// A notice of message `seq` of `epoch`, at entry `id` (nil: not told): nothing to do if the
    /// mirror has it, or it waits for this node's batches in flight; otherwise a read (of the tail
    /// again, for another epoch than the topic's).
    func noticed(_ seq: UInt64, epoch: String, id: String?, reader: StreamReader) {
        if has(seq, epoch: epoch, id: id, reader: reader) { return }
        guard ownInFlight > 0 else { return read(for: epoch, reader) }
        if heldNotice.map({ $0.epoch != epoch || $0.seq < seq }) ?? true { heldNotice = (seq, epoch, id) }
    }

    /// Whether the mirror holds message `seq` of `epoch`, at entry `id`, already. With the entry's
    /// ID, by the ID: a later entry is new though its number is not (Redis went back, and another
    /// node numbered on from there).
    func has(_ seq: UInt64, epoch: String, id: String?, reader: StreamReader) -> Bool {
        guard let cursor = reader.cursor, epoch == hub.topic(name).epoch else { return false }
        if let id, let entry = StreamCursor.order(id), let last = StreamCursor.order(cursor.lastID) { return entry <= last }
        return seq <= cursor.lastNumber
    }

    /// What this node has read of the topic's log, once it follows it: for a publish to check that
    /// Redis is not behind it.
    func known(_ reader: StreamReader) -> PublishBatch.Known? {
        let topic = hub.topic(name)
        guard topic.isSynced, let cursor = reader.cursor else { return nil }
        return PublishBatch.Known(epoch: topic.epoch, number: cursor.lastNumber)
    }

    /// A topic is mirrored on the loop as it is read: it is never behind.
    var acceptsMore: Bool { true }

    func follow(_ entries: [StreamEntry], reader: StreamReader) {
        let topic = hub.topic(name)
        var cursor = reader.cursor ?? StreamCursor()
        for entry in entries {
            guard let seq = entry.number("s") else { continue }
            let publishedAt = entry.number("t") ?? 0
            let data = entry.field("d") ?? Array("null".utf8)
            if let epoch = entry.field("e").map({ String(decoding: $0, as: UTF8.self) }), epoch != topic.epoch {
                if retired.left(epoch) {
                    // An epoch this node left, back: Redis came back with older data again.
                    logger.error("topic log went back to an epoch left: did Redis come back with older data?", metadata: [
                        "topic": "\(name)", "epoch": "\(epoch)",
                    ])
                    retired.wentBack = epoch
                    reader.cursor = nil
                    return
                }
                // The log started over in a new epoch: Redis lost the old one. Subscribers are
                // told, and the cursor starts again from this entry.
                startOver(topic, seq: seq, publishedAt: publishedAt, data: data, epoch: epoch)
                cursor = StreamCursor(lastID: entry.id, lastNumber: seq)
                continue
            }
            switch cursor.accept(id: entry.id, number: seq) {
            case .next:
                topic.mirror(seq: seq, publishedAt: publishedAt, data: data)
            case .gap(let from, let to):
                topic.skip(from: from, to: to)
                topic.mirror(seq: seq, publishedAt: publishedAt, data: data)
            case .duplicate:
                break
            case .regressed:
                // A number after one already read, in the same epoch: Redis came back with older
                // data and numbered on from it. The tail is read again, renewing the epoch in Redis
                // (once for every node), and the topic starts over in it.
                logger.error("topic log went back: did Redis come back with older data?", metadata: [
                    "topic": "\(name)", "seq": "\(seq)", "after": "\(cursor.lastNumber)",
                ])
                retired.wentBack = topic.epoch
                reader.cursor = nil
                return
            }
        }
        reader.cursor = cursor
        settleWaiters(upTo: cursor, epoch: topic.epoch)
    }

    /// Answers the publishes of this node waiting for a message the mirror has now.
    private func settleWaiters(upTo cursor: StreamCursor, epoch: String) {
        guard !waiters.isEmpty else { return }
        let done = waiters.filter { $0.epoch == epoch && $0.seq <= cursor.lastNumber }
        waiters.removeAll { $0.epoch == epoch && $0.seq <= cursor.lastNumber }
        for waiter in done { waiter.completion(.success(waiter.seq)) }
    }

    /// Redis lost the topic's log: a new epoch. Publishes of the old epoch still waiting for their
    /// message cannot be told whether it was lost with it.
    private func startOver(_ topic: Topic, seq: UInt64, publishedAt: UInt64, data: [UInt8], epoch: String) {
        startOver(topic, after: max(seq, 1) - 1, epoch: epoch)
        topic.mirror(seq: seq, publishedAt: publishedAt, data: data)
    }

    /// The topic starts over in `epoch` after number `base`; see `startOver(_:seq:...)`.
    private func startOver(_ topic: Topic, after base: UInt64, epoch: String) {
        logger.error(
            "topic log started over: did Redis lose its data?", metadata: ["topic": "\(name)", "after": "\(base)", "epoch": "\(epoch)"])
        retired.leave(topic.epoch)
        topic.restart(after: base, epoch: epoch)
        let lost = waiters.filter { $0.epoch != epoch }
        waiters.removeAll { $0.epoch != epoch }
        for waiter in lost {
            waiter.completion(.failure(.outcomeUnknown("Redis lost its data while the message was being published")))
        }
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
    /// messages stay in Redis for resumes that need them (`ClusterEngine.history`). After the log
    /// went back: the same, in the epoch that replaces the one that went back, after a `reset`.
    func resync(_ reader: StreamReader, done: @escaping (StreamCursor?) -> Void) {
        let arguments = [
            "4", keys.topicSeq(name), keys.topicLog(name), keys.topicEpoch(name), keys.topicLast(name), String(tail),
            freshEpoch(), retired.list, channel, ClusterKeys.encode(.topicPublished(name)), String(keysMilliseconds), keys.life,
        ]
        let sent = commands.eval(ClusterScripts.topicTail, arguments) { [self] reply in
            guard let parts = reply?.elements, parts.count == 3, let seq = parts[0].integer, seq >= 0, let epoch = parts[2].text else {
                unreachable(reader)
                return done(nil)
            }
            // The script gave the topic's keys their lifetime.
            keysRenewedAt = commands.loop.nowMilliseconds
            // Entries of another epoch are the life that went back, or were numbered on what
            // Redis went back to before the epoch was renewed: not this epoch's history.
            let all = Array(StreamEntry.parse(range: parts[1]).reversed())
            let entries = all.filter { entry in entry.field("e").map { $0.elementsEqual(epoch.utf8) } ?? true }
            let topic = hub.topic(name)
            // The mirror starts just before the oldest entry read (or at the number, if the log
            // is empty): what came before is not in this node's history, as on a node that trims.
            let first = entries.first?.number("s") ?? UInt64(seq) + 1
            if !topic.isSynced {
                // Nobody has subscribed yet: its epoch is the log's.
                topic.adopt(epoch: epoch)
            } else if epoch != topic.epoch {
                startOver(topic, after: max(first, 1) - 1, epoch: epoch)
            }
            retired.wentBack = nil
            if first > topic.seq + 1 { topic.skip(from: topic.seq + 1, to: first - 1) }
            let from = topic.seq
            reader.cursor = StreamCursor(lastID: "0-0", lastNumber: from)
            follow(entries.filter { ($0.number("s") ?? 0) > from }, reader: reader)
            // Everything in the tail was taken or passed over: the next read starts after it.
            if let newest = all.last?.id, let cursor = reader.cursor, newest != cursor.lastID {
                reader.cursor = StreamCursor(lastID: newest, lastNumber: cursor.lastNumber)
            }
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
