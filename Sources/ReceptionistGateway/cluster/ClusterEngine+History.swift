import ReceptionistJSON
import ReceptionistModel
import ReceptionistPush

/// What each topic's and store's log keeps in Redis (`--redis-history`, `--redis-history-ttl`).
struct RedisHistory: Sendable, Equatable {
    let maxEntries: Int
    /// 0: no age limit.
    let maxAgeMilliseconds: Int

    init(maxEntries: Int, maxAgeSeconds: Double) {
        self.maxEntries = max(1, maxEntries)
        maxAgeMilliseconds = max(0, Int(maxAgeSeconds * 1000))
    }
}

extension ClusterEngine {
    /// A resume older than this node's history: the missing messages from the topic's log in
    /// Redis. The log is numbered without holes, so the newest `latest - after` entries reach
    /// back to `after + 1` (fewer if Redis trimmed them); at most `--redis-history` of them are
    /// read, in one command, and the answer waits at most `--redis-timeout`.
    func history(of topic: String, after: UInt64, through: UInt64, done: @escaping ([TopicEntry]?) -> Void) {
        let latest = max(topicReaders[topic]?.reader.cursor?.lastNumber ?? through, through)
        let link = shard(topic)
        guard latest > after, link.isUp else { return done(nil) }
        let count = min(latest - after, UInt64(redisHistory.maxEntries))
        LoopDeadline.run(loop, seconds: timeoutSeconds, timedOut: { nil }, { answer in
            let sent = link.commands.send(["XREVRANGE", link.keys.topicLog(topic), "+", "-", "COUNT", String(count)]) { reply in
                guard let reply, reply.elements != nil else { return answer(nil) }
                var entries: [TopicEntry] = []
                for entry in StreamEntry.parse(range: reply).reversed() {
                    guard let seq = entry.number("s"), seq > after, seq <= through else { continue }
                    entries.append(TopicEntry(seq: seq, publishedAt: entry.number("t") ?? 0, data: entry.fields["d"] ?? Array("null".utf8)))
                }
                answer(entries)
            }
            if !sent { answer(nil) }
        }, done: done)
    }

    /// A store resume older than this node's replica history: the missing change sets from the
    /// store's log in Redis, read and decoded as `history(of:)` reads a topic's. The newest
    /// entries are read, as many as the replica is behind `after` plus what the stream reader has
    /// seen beyond it, at most `--redis-history`.
    func storeHistory(of store: String, after: UInt64, through: UInt64, done: @escaping ([ChangeSet]?) -> Void) {
        let link = shard(store)
        let latest = max(storeLatest(store) ?? through, through)
        guard latest > after, link.isUp else { return done(nil) }
        let count = min(latest - after, UInt64(redisHistory.maxEntries))
        LoopDeadline.run(loop, seconds: timeoutSeconds, timedOut: { nil }, { answer in
            let sent = link.commands.send(["XREVRANGE", link.keys.storeLog(store), "+", "-", "COUNT", String(count)]) { reply in
                guard let reply, reply.elements != nil else { return answer(nil) }
                var changeSets: [ChangeSet] = []
                for entry in StreamEntry.parse(range: reply).reversed() {
                    guard let version = entry.number("v"), version > after, version <= through else { continue }
                    guard let json = entry.fields["c"], let value = try? JSONParser.parse(json),
                          let changeSet = ReplicatedChangeSet.changeSet(of: store, value)
                    else { return answer(nil) }
                    changeSets.append(changeSet)
                }
                answer(changeSets)
            }
            if !sent { answer(nil) }
        }, done: done)
    }
}
