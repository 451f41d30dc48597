/// The scripts of cluster presence and the nodes' heartbeats.
extension ClusterScripts {
    /// Redis's clock in milliseconds, as `ms`: heartbeats are compared by one clock, not the nodes'.
    private static let now = """
        local clock = redis.call('TIME')
        local ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

        """

    /// KEYS: the presence hash, the nodes. ARGV: node, entry ("" removes it), channel, notice.
    /// Stores this node's entry and beats its heart with it, so no reader takes a node that has
    /// just shared for dead.
    static let presenceShare = RedisScript(now + """
        redis.call('ZADD', KEYS[2], ms, ARGV[1])
        if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1])
        else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
        redis.call('PUBLISH', ARGV[3], ARGV[4])
        return 1
        """)

    /// KEYS: the presence hash, the nodes. ARGV: this node, heartbeat time-out in ms. Returns the
    /// other live nodes' entries as node, entry pairs, and removes the entries of nodes not heard
    /// from within the time-out (never this node's own).
    static let presenceRead = RedisScript(now + """
        local all = redis.call('HGETALL', KEYS[1])
        local out = {}
        for i = 1, #all, 2 do
          local node = all[i]
          local beat = redis.call('ZSCORE', KEYS[2], node)
          if beat and tonumber(beat) >= ms - tonumber(ARGV[2]) then
            if node ~= ARGV[1] then
              out[#out + 1] = node
              out[#out + 1] = all[i + 1]
            end
          elseif node ~= ARGV[1] then
            redis.call('HDEL', KEYS[1], node)
          end
        end
        return out
        """)

    /// KEYS: the nodes. ARGV: this node, heartbeat time-out in ms. Beats this node's heart;
    /// returns 1 first if it had been silent past the time-out (others may have removed its
    /// entries), else 0, then the nodes silent past the time-out. Nodes silent for a hundred
    /// time-outs are forgotten, so the set holds only recent nodes.
    static let heartbeat = RedisScript(now + """
        local timeout = tonumber(ARGV[2])
        local last = redis.call('ZSCORE', KEYS[1], ARGV[1])
        local stale = 0
        if not last or tonumber(last) < ms - timeout then stale = 1 end
        redis.call('ZADD', KEYS[1], ms, ARGV[1])
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms - 100 * timeout)
        local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms - timeout - 1)
        table.insert(dead, 1, stale)
        return dead
        """)
}
