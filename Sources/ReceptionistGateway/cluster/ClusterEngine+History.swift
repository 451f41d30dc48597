import ReceptionistJSON
import ReceptionistModel
import ReceptionistPush

/// What each topic's and store's log keeps in Redis (`--redis-history`, `--redis-history-ttl`),
/// and how long a quiet topic's keys stay there (`--redis-topic-ttl`).
struct RedisHistory: Sendable, Equatable {
    let maxEntries: Int
    /// 0: no age limit.
    let maxAgeMilliseconds: Int
    /// How long a topic's keys (its number, log, epoch and last entry's ID) live after their last
    /// renewal, by a publish or by a node following the topic; 0: for good.
    let topicKeysMilliseconds: Int
    /// How often a node renews them at most: an eighth of their lifetime, so they live at least
    /// seven eighths of it after a topic's last publish; with no lifetime, once (each node takes
    /// away a lifetime another node's setting gave them).
    var topicKeysRenewalMilliseconds: UInt64 { topicKeysMilliseconds > 0 ? UInt64(topicKeysMilliseconds / 8) : .max }

    init(maxEntries: Int, maxAgeSeconds: Double, topicKeysSeconds: Double = 0) {
        self.maxEntries = max(1, maxEntries)
        maxAgeMilliseconds = max(0, Int(maxAgeSeconds * 1000))
        topicKeysMilliseconds = topicKeysSeconds > 0 ? max(1, Int(topicKeysSeconds * 1000)) : 0
    }
}

extension ClusterEngine {
    /// A resume older than this node's history: the missing messages from the topic's log in
    /// Redis. The log is numbered without holes, so the newest `latest - after` entries reach
    /// back to `after + 1` (fewer if Redis trimmed them); at most `--redis-history` of them are
    /// read, in one command, and the answer waits at most `--redis-timeout`.
    func history(of topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]?) -> Void) {
        let cursor = topicReaders[topic]?.reader.cursor
        let link = shard(topic)
        readBack(
            link, key: link.keys.topicLog(topic), number: "s", epoch: hub.topic(topic).epoch, after: after, through: through, cursor: cursor,
            done: done
        ) {
            entry, seq in
            TopicEntry(seq: seq, publishedAt: entry.number("t") ?? 0, data: entry.field("d") ?? Array("null".utf8))
        }
    }

    /// A store resume older than this node's replica history: the missing change sets from the
    /// store's log in Redis, read as `history(of:)` reads a topic's, each decoded as observers
    /// saw it; an entry that does not decode fails the whole answer (the caller then resets).
    func storeHistory(of store: String, after: UInt64, through: UInt64, done: @escaping ([ChangeSet]?) -> Void) {
        let cursor = storeCursor(store)
        let link = shard(store)
        readBack(
            link, key: link.keys.storeLog(store), number: "v", epoch: stores.store(store)?.epoch, after: after, through: through,
            cursor: cursor, done: done
        ) {
            entry, _ in
            guard let json = entry.field("c"), let value = try? JSONParser.parseStored(json) else { return nil }
            return ReplicatedChangeSet.changeSet(of: store, value)
        }
    }

    /// Reads the entries numbered `after + 1 ... through` (by the field `number`) of the log
    /// `key`, at most `--redis-history`, oldest first, each made by `make` (nil fails the answer);
    /// `done` gets nil when the log could not be read in time. The log is read back from the last
    /// entry this node read (`cursor`), whose number it knows: Redis may hold newer ones (other
    /// nodes' notices not yet read, this node's batches in flight), and read back from the newest,
    /// as many entries would fall short of `after + 1`. Entries of another epoch than `epoch` (the
    /// one the resume is in) are another life's under the same numbers (Redis came back with older
    /// data): never handed out.
    private func readBack<T>(
        _ link: RedisLink, key: String, number: String, epoch: String?, after: UInt64, through: UInt64, cursor: StreamCursor?,
        done: @escaping ([T]?) -> Void, make: @escaping (StreamEntry, UInt64) -> T?
    ) {
        // From the cursor when it names an entry and reaches `through`; else from the newest,
        // numbered `through` at least.
        let (newest, latest) = if let cursor, cursor.lastID != StreamCursor.start, cursor.lastNumber >= through {
            (cursor.lastID, cursor.lastNumber)
        } else {
            ("+", through)
        }
        guard latest > after, link.isUp else { return done(nil) }
        let count = min(latest - after, UInt64(redisHistory.maxEntries))
        LoopDeadline.run(loop, seconds: timeoutSeconds, timedOut: { nil }, { answer in
            let sent = link.commands.send(["XREVRANGE", key, newest, "-", "COUNT", String(count)]) { reply in
                guard let reply, reply.elements != nil else { return answer(nil) }
                var made: [T] = []
                for entry in StreamEntry.parse(range: reply).reversed() {
                    guard let value = entry.number(number), value > after, value <= through else { continue }
                    if let epoch, let written = entry.field("e"), !written.elementsEqual(epoch.utf8) { continue }
                    guard let item = make(entry, value) else { return answer(nil) }
                    made.append(item)
                }
                answer(made)
            }
            if !sent { answer(nil) }
        }, done: done)
    }
}
