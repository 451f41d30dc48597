/// The script that keeps the keys of topics followed while nobody publishes to them.
extension ClusterScripts {
    /// KEYS: each topic's seq, log, epoch and last-entry keys (`ClusterKeys.appendTopicKeys`).
    /// ARGV: how long they live now, in ms. A key that is not there stays not there.
    static let renewTopics = RedisScript("""
        for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
        return 1
        """)
}
