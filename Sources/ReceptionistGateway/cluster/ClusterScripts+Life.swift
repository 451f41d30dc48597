import ReceptionistLoop

/// The scripts of a Redis server's life (`RedisLife`).
extension ClusterScripts {
    /// Run by each node as its command connection comes up, before it writes. KEYS: the run the
    /// life was last confirmed on, the life. ARGV: the server's run id ("" when it does not say),
    /// a name for a new life, "1" when the server keeps every write. The life stays while the
    /// run is the same, or the server keeps every write (a restart lost nothing), or the run
    /// cannot be told; otherwise, or when there is none (a new server, or one that lost
    /// everything), a new life begins. Returns the life's name.
    static let life = RedisScript("""
        local run = redis.call('GET', KEYS[1])
        local life = redis.call('GET', KEYS[2])
        if life and (run == ARGV[1] or ARGV[3] == '1' or ARGV[1] == '') then
          if ARGV[1] ~= '' and run ~= ARGV[1] then redis.call('SET', KEYS[1], ARGV[1]) end
          return life
        end
        redis.call('SET', KEYS[1], ARGV[1])
        redis.call('SET', KEYS[2], ARGV[2])
        return ARGV[2]
        """)

    /// Whether `epoch` was made in `life` (the value of `ClusterKeys.life`; false: none yet,
    /// every epoch is). Prefixed to the scripts that read an epoch before they number.
    static let ofLife = """
        local function ofLife(epoch, life)
          return not life or string.sub(epoch, 1, #life + 1) == life .. '.'
        end

        """
}
