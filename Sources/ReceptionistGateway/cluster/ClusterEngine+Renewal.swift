import ReceptionistLoop

extension ClusterEngine {
    /// Topics whose keys one `renewTopics` call renews at most.
    static let topicsPerRenewal = 128

    /// Renews, in Redis, the keys of every topic a subscriber here follows and whose keys this node
    /// last renewed half their lifetime ago or more (`--redis-topic-ttl`): a publish renews them
    /// too, so only a topic followed while nobody publishes to it would otherwise lose them, and
    /// its subscribers their epoch. Run every quarter of the lifetime (within 50 ms and a minute),
    /// so a topic's keys are renewed before they end however the timer runs late; a topic costs a
    /// renewal every half lifetime, a day's topics 4 keys a day in a call of up to
    /// `topicsPerRenewal` topics.
    func renewFollowedTopics() {
        let keep = UInt64(redisHistory.topicKeysMilliseconds)
        guard keep > 0 else { return }
        let now = loop.nowMilliseconds
        var due = Array(repeating: [String](), count: shards.count)
        for (name, pair) in topicReaders where pair.follower.keysRenewedAt.map({ $0 + keep / 2 <= now }) ?? true {
            guard hub.topic(name).subscriberCount > 0 else { continue }
            let index = ShardMap.index(of: name, shards: shards.count)
            guard shards[index].isUp else { continue }
            pair.follower.keysRenewedAt = now
            due[index].append(name)
        }
        for (index, names) in due.enumerated() {
            let link = shards[index]
            var start = 0
            while start < names.count {
                let chunk = names[start..<min(start + Self.topicsPerRenewal, names.count)]
                var arguments = RedisArguments(capacity: 16 + chunk.count * 160)
                arguments.append(chunk.count * 4)
                for name in chunk { link.keys.appendTopicKeys(name, to: &arguments) }
                arguments.append(Int(keep))
                link.commands.eval(ClusterScripts.renewTopics, arguments) { _ in }
                start += Self.topicsPerRenewal
            }
        }
    }
}
