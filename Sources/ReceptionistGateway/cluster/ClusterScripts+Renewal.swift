/// The script that keeps the keys of topics followed while nobody publishes to them.
extension ClusterScripts {
    /// KEYS: each topic's seq, log, epoch and last-entry keys (`ClusterKeys.appendTopicKeys`).
    /// ARGV: how long they live now, in ms (0: for good). A key that is not there stays not there.
    static let renewTopics = RedisScript(setLifetime + """
        setLifetime(KEYS, ARGV[1])
        return 1
        """)
}
