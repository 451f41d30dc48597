import ReceptionistLoop

extension ClusterEngine {
    /// Topics whose keys one `renewTopics` call renews at most.
    static let topicsPerRenewal = 128

    /// Renews, in Redis, the keys of every topic a subscriber here follows and whose keys this node
    /// last renewed an eighth of their lifetime ago or more (`--redis-topic-ttl`): a publish renews
    /// them too, so only a topic followed while nobody publishes to it would otherwise lose them,
    /// and its subscribers their epoch. Run every eighth of the lifetime (within 50 ms and a
    /// minute), so a followed topic's keys keep at least three quarters of it however the timer
    /// runs late; a topic costs a renewal every eighth, in a call of up to `topicsPerRenewal` topics.
    /// With no lifetime (`--redis-topic-ttl 0`), each followed topic's keys lose any they have, once.
    func renewFollowedTopics() {
        let keep = redisHistory.topicKeysMilliseconds
        let now = loop.nowMilliseconds, every = redisHistory.topicKeysRenewalMilliseconds
        var due = Array(repeating: [String](), count: shards.count)
        for (name, pair) in topicReaders where hub.topic(name).subscriberCount > 0 {
            let index = ShardMap.index(of: name, shards: shards.count)
            guard shards[index].isUp, pair.follower.renewingKeys(now: now, every: every) else { continue }
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
                arguments.append(keep)
                link.commands.eval(ClusterScripts.renewTopics, arguments) { _ in }
                start += Self.topicsPerRenewal
            }
        }
    }
}
