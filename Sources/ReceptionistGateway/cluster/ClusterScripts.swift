import ReceptionistLoop
import ReceptionistWire

/// The Lua scripts that make each cluster write atomic in Redis. A script runs alone, so its
/// reads and writes, the stream entry and the notification happen as one step.
enum ClusterScripts {
    /// Trims a log to the entries of the last ARGV-given milliseconds (0: no age limit), by
    /// Redis's clock, as the stream's IDs are; exact, so what a client may resume is what the
    /// option says. Prefixed to `commit`; `publish`, which runs for every message, does the same in
    /// line rather than make the function on each call.
    private static let trimByAge = """
        local function trimByAge(key, ttl)
          ttl = tonumber(ttl)
          if ttl > 0 then
            local now = redis.call('TIME')
            local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            redis.call('XTRIM', key, 'MINID', ms - ttl)
          end
        end

        """

    /// Commits to stores (`CommitBatch`), each run in turn exactly as it would run alone. KEYS: for
    /// each commit its store's version, models, log and epoch. ARGV: max log length, channel, max
    /// log age in ms (0: none), then for each commit its expected version and epoch, entry JSON,
    /// notice and count of model pairs, then those pairs of model id and JSON ("" deletes); the
    /// server's life key (`RedisLife`) comes fourth, before the commits.
    /// Returns, for each commit, two numbers: 1 and the version when appended, 0 and the current
    /// version when the store has moved on, -1 and 0 when there is no such store, -2 and the
    /// current version when the store is in another epoch (deleted and made again since the
    /// commit's replica knew it, or one of an earlier life of the server). Each entry carries the store's epoch, so a node that missed the
    /// delete sees the store it follows is gone.
    static let commit = RedisScript(trimByAge + ofLife + """
        local life = redis.call('GET', ARGV[4])
        local out = {}
        local a = 5
        for k = 1, #KEYS, 4 do
          local expected, epoch, entry, notice = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
          local first = a + 5
          a = first + 2 * tonumber(ARGV[a + 4])
          local current = redis.call('GET', KEYS[k])
          local stored = redis.call('GET', KEYS[k + 3])
          if not current then
            out[#out + 1] = -1
            out[#out + 1] = 0
          elseif stored and ((epoch ~= '' and stored ~= epoch) or not ofLife(stored, life)) then
            out[#out + 1] = -2
            out[#out + 1] = tonumber(current)
          elseif tonumber(current) ~= tonumber(expected) then
            out[#out + 1] = 0
            out[#out + 1] = tonumber(current)
          else
            local version = tonumber(current) + 1
            redis.call('SET', KEYS[k], version)
            for i = first, a - 1, 2 do
              if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[k + 1], ARGV[i])
              else redis.call('HSET', KEYS[k + 1], ARGV[i], ARGV[i + 1]) end
            end
            if stored then
              redis.call('XADD', KEYS[k + 2], 'MAXLEN', '~', ARGV[1], '*', 'v', version, 'e', stored, 'c', entry)
            else
              redis.call('XADD', KEYS[k + 2], 'MAXLEN', '~', ARGV[1], '*', 'v', version, 'c', entry)
            end
            trimByAge(KEYS[k + 2], ARGV[3])
            redis.call('PUBLISH', ARGV[2], notice)
            out[#out + 1] = 1
            out[#out + 1] = version
          end
        end
        return out
        """)

    /// KEYS: version, models, log, epoch. ARGV: a fresh epoch, the epochs that may not be the
    /// store's (joined by commas: one this node saw go back, ones it has left), the cluster's
    /// channel, the store's creation notice, the server's life key (an epoch of an earlier life
    /// is renewed too), the version the node's replica holds ('' for none). The fresh epoch is
    /// taken by a store that has none
    /// (made before epochs were kept), and in place of one of those (Redis came back with older
    /// data; unless another node renewed it first), so no version is had twice in one epoch; then
    /// every node is told, as of a store made anew, and reads it whole. Returns
    /// {version, {id, json, ...}, last log ID, epoch, ID of the entry after the version held or
    /// ''}, read together; {-1, {}, '0-0', ''} when there is no such store.
    static let snapshot = RedisScript(listed + ofLife + """
        local version = redis.call('GET', KEYS[1])
        if not version then return {-1, {}, '0-0', ''} end
        local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
        local id = '0-0'
        if #last > 0 then id = last[1][1] end
        local epoch = redis.call('GET', KEYS[4])
        if not epoch then
          epoch = ARGV[1]
          redis.call('SET', KEYS[4], epoch)
        elseif listed(ARGV[2], epoch) or not ofLife(epoch, redis.call('GET', ARGV[5])) then
          epoch = ARGV[1]
          redis.call('SET', KEYS[4], epoch)
          redis.call('PUBLISH', ARGV[3], ARGV[4])
        end
        -- The entry after the version the node holds (ARGV[6]), when the log still has it and it
        -- is at most 512 back: the node then reads on from it rather than reset.
        local from = ''
        local v, held = tonumber(version), tonumber(ARGV[6])
        if held and v > held and v - held <= 512 then
          local first = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', v - held)[v - held]
          if first then
            local fields = first[2]
            for i = 1, #fields - 1, 2 do
              if fields[i] == 'v' and tonumber(fields[i + 1]) == held + 1 then from = first[1] end
            end
          end
        end
        return {v, redis.call('HGETALL', KEYS[2]), id, epoch, from}
        """)

    /// KEYS: version, stores set, epoch. ARGV: name, channel, notice, the new store's epoch.
    /// Returns 1 when created, 0 when it exists.
    static let createStore = RedisScript("""
        if not redis.call('SET', KEYS[1], 0, 'NX') then return 0 end
        redis.call('SET', KEYS[3], ARGV[4])
        redis.call('SADD', KEYS[2], ARGV[1])
        redis.call('PUBLISH', ARGV[2], ARGV[3])
        return 1
        """)

    /// KEYS: version, models, log, epoch, stores set. ARGV: name, channel, notice (a deletion's
    /// with no epoch: the script appends it). Deletes everything kept of the store; returns the epoch it had ("" for a store
    /// made before epochs were kept), or false when there is no such store.
    static let deleteStore = RedisScript("""
        if redis.call('EXISTS', KEYS[1]) == 0 then return false end
        local epoch = redis.call('GET', KEYS[4]) or ''
        redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
        redis.call('SREM', KEYS[5], ARGV[1])
        redis.call('PUBLISH', ARGV[2], ARGV[3] .. epoch)
        return epoch
        """)

    /// Gives every key of `keys` (a topic's) the lifetime `keep` ms, or none (`'0'`: for good), so
    /// that they end together. Prefixed to `topicTail` and `renewTopics`.
    static let setLifetime = """
        local function setLifetime(keys, keep)
          for i = 1, #keys do
            if keep == '0' then redis.call('PERSIST', keys[i]) else redis.call('PEXPIRE', keys[i], keep) end
          end
        end

        """

    /// A batch of publishes (`PublishBatch`), in one call. KEYS: each topic's seq, log, epoch and
    /// last entry's ID (`ClusterKeys.topicLast`).
    /// ARGV: max log length, max log age in ms (0: none), how long the topic's keys live in ms (0:
    /// for good), the cluster's channel, the publishing node's channel, the server's life key,
    /// then for each topic: its
    /// notice, a fresh epoch, the epoch the publishing node follows and the last number it has read
    /// in it ("" and 0: none), whether to renew its keys' lifetime ("1": the node last did an eighth
    /// of it ago or more), its count n, and n pairs of
    /// data JSON and publishedAt. The fresh epoch is taken by a topic that has none (new, or Redis
    /// lost it) and by one whose number is behind what the node has read in the epoch Redis still
    /// names: Redis came back with older data (a restart from a lagging snapshot, a failover to a
    /// lagging replica), and its numbers would otherwise be handed out a second time in one epoch;
    /// and by one whose epoch is of an earlier life of the server (`RedisLife`), which no node may
    /// have read past.
    /// Each topic's messages take the next n numbers, in order; the topic's notice, with its last
    /// number, epoch and last entry ID, is published once to each other node's channel (to a
    /// channel marked `m:`, `ClusterKeys.carryingMark`, with the messages themselves, numbered,
    /// and the ID of the entry before them, up to 64 KiB of data: that node then mirrors them
    /// without reading the log), and its log trimmed once (by the last `XADD`, and by age as
    /// `trimByAge` does). Its keys get their lifetime when asked, and when the topic (or its epoch)
    /// is new; otherwise they keep theirs (`KEEPTTL`): a renewal costs Redis four commands, so a
    /// node asks for one at most every eighth of the lifetime. Returns first seq, epoch, last
    /// entry ID and the ID of the entry before the batch ('0-0': none) for each topic in turn, in
    /// one flat array: enough for the
    /// publishing node to mirror its own messages without reading them back, when the entry before
    /// them is the last it read (otherwise entries it has not read came between, or Redis went
    /// back and numbered on from older data).
    ///
    /// The publishing node is not told of its own messages: it has them from the answer. The other
    /// nodes' channels are the ones `PUBSUB CHANNELS` lists under the cluster's (a node's, while it
    /// is subscribed). A node of 0.8.0 or earlier listens only on the cluster's channel: while more
    /// connections listen there than nodes have channels, the notice goes there too. A node
    /// subscribes to both channels in one command, so when no more connections listen on the
    /// cluster's channel than on the publisher's own, no other node listens, and the listing
    /// (a scan of every channel) is skipped: one `PUBSUB NUMSUB` is all a lone node pays.
    ///
    /// Each entry carries its epoch, so a follower sees the log start over even where the numbers
    /// alone could not tell (one message before the loss, one after). The first entry of a new
    /// epoch is given an ID past this millisecond (when the log's newest is not already past it),
    /// so it sorts after every entry of the lost log that a node may still be reading after (a log
    /// recreated within the same millisecond would otherwise start below them).
    ///
    /// It runs for every publish, so it makes no table, closure or string it can do without (no
    /// listener list for a lone node, the topic's epoch read in line, one flat answer): each costs
    /// Redis instructions on every call (`bench/callgrind-redis.sh`).
    static let publish = RedisScript("""
        local counts = redis.call('PUBSUB', 'NUMSUB', ARGV[4], ARGV[5])
        local life = redis.call('GET', ARGV[6])
        if life then life = life .. '.' end
        local listeners
        if counts[2] > counts[4] then
          listeners = {}
          local nodes = redis.call('PUBSUB', 'CHANNELS', ARGV[4] .. ':*')
          for _, channel in ipairs(nodes) do
            if channel ~= ARGV[5] then listeners[#listeners + 1] = channel end
          end
          if counts[2] > #nodes then listeners[#listeners + 1] = ARGV[4] end
        end
        local mark = #ARGV[4] + 2
        local ttl = tonumber(ARGV[2])
        local keep = ARGV[3]
        local format = string.format
        local out = {}
        local a = 7
        for k = 1, #KEYS, 4 do
          local seqKey, logKey, epochKey, lastKey = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
          local notice, n = ARGV[a], tonumber(ARGV[a + 5])
          local last = redis.call('INCRBY', seqKey, n)
          local first = last - n + 1
          local renew = ARGV[a + 4] == '1' or first == 1
          local epoch = redis.call('GET', epochKey)
          local previous = redis.call('GET', lastKey) or '0-0'
          local id = '*'
          if not epoch or (epoch == ARGV[a + 2] and first <= tonumber(ARGV[a + 3]))
            or (life and string.sub(epoch, 1, #life) ~= life) then
            epoch = ARGV[a + 1]
            renew = true
            redis.call('SET', epochKey, epoch)
            local now = redis.call('TIME')
            local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + 1
            local top = redis.call('XREVRANGE', logKey, '+', '-', 'COUNT', 1)
            if #top == 0 or tonumber(string.match(top[1][1], '^%d+')) < ms then id = ms .. '-0' end
          end
          a = a + 6
          local from = a
          for i = 0, n - 2 do
            redis.call('XADD', logKey, id, 's', format('%d', first + i), 't', ARGV[a + 1], 'e', epoch, 'd', ARGV[a])
            id = '*'
            a = a + 2
          end
          id = redis.call('XADD', logKey, 'MAXLEN', '~', ARGV[1], id, 's', last, 't', ARGV[a + 1], 'e', epoch, 'd', ARGV[a])
          if not renew then
            redis.call('SET', lastKey, id, 'KEEPTTL')
          elseif keep == '0' then
            redis.call('SET', lastKey, id)
            redis.call('PERSIST', seqKey)
            redis.call('PERSIST', logKey)
            redis.call('PERSIST', epochKey)
          else
            redis.call('SET', lastKey, id, 'PX', keep)
            redis.call('PEXPIRE', seqKey, keep)
            redis.call('PEXPIRE', logKey, keep)
            redis.call('PEXPIRE', epochKey, keep)
          end
          a = a + 2
          if ttl > 0 then
            local now = redis.call('TIME')
            redis.call('XTRIM', logKey, 'MINID', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - ttl)
          end
          if listeners then
            local bare = notice .. ':' .. last .. ':' .. epoch .. ':' .. id
            local carried
            for _, channel in ipairs(listeners) do
              if string.sub(channel, mark, mark + 1) == 'm:' then
                if not carried then
                  local parts = {'m', string.sub(notice, 2), ':', last, ':', epoch, ':', id, ':', n}
                  local size = 0
                  for i = from, from + 2 * n - 2, 2 do
                    local data = ARGV[i]
                    size = size + #data
                    parts[#parts + 1] = ':' .. ARGV[i + 1] .. ':' .. #data .. ':'
                    parts[#parts + 1] = data
                  end
                  parts[#parts + 1] = ':' .. previous
                  if size > 65536 then carried = bare else carried = table.concat(parts) end
                end
                redis.call('PUBLISH', channel, carried)
              else
                redis.call('PUBLISH', channel, bare)
              end
            end
          end
          out[#out + 1] = first
          out[#out + 1] = epoch
          out[#out + 1] = id
          out[#out + 1] = previous
        end
        return out
        """)

    /// Whether `epoch` is in `list`, epochs joined by commas: those a node saw go back, or left.
    private static let listed = """
        local function listed(list, epoch)
          return string.find(',' .. list .. ',', ',' .. epoch .. ',', 1, true) ~= nil
        end

        """

    /// KEYS: seq, log, epoch, last entry's ID. ARGV: how many entries, a fresh epoch, the epochs
    /// that may not be the topic's (joined by commas: one this node saw go back, ones it has
    /// left), the cluster's channel, the topic's notice, how long the topic's keys live in ms (0:
    /// for good; else until a publish or the renewal of a node following it, `renewTopics`: so
    /// that a name only subscribed to holds no key for good), renewed here as a node starts
    /// following it, and the server's life key (an epoch of an earlier life is renewed too). The fresh epoch is taken by a topic that has none, and in
    /// place of one of those (Redis came back with older data; unless another node renewed it
    /// first), and then every node is told with the notice, its number and the new epoch, so none
    /// stays in the old. Returns {seq, the newest entries, newest first, epoch}, read together:
    /// where a node starts mirroring a topic it has just heard of, or starts again on one whose
    /// log went back.
    static let topicTail = RedisScript(setLifetime + listed + ofLife + """
        local epoch = redis.call('GET', KEYS[3])
        if not epoch then
          epoch = ARGV[2]
          redis.call('SET', KEYS[3], epoch)
        end
        local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
        if epoch ~= ARGV[2] and (listed(ARGV[3], epoch) or not ofLife(epoch, redis.call('GET', ARGV[7]))) then
          epoch = ARGV[2]
          redis.call('SET', KEYS[3], epoch)
          redis.call('PUBLISH', ARGV[4], ARGV[5] .. ':' .. seq .. ':' .. epoch)
        end
        setLifetime(KEYS, ARGV[6])
        return {seq, redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ARGV[1]), epoch}
        """)

    /// KEYS: the key's entry, the table of every entry by first use. ARGV: fingerprint (hex),
    /// window in ms, now in ms, most keys, the claim's own name. Returns nil when claimed (the
    /// entry is then `p:<fingerprint>:<claim>`, pending, expiring after the window), else the
    /// entry as it stands (`p:<fingerprint>[:<claim>]` or `d:<fingerprint>:<status>:<body>`).
    /// Past the most keys the oldest entries are deleted. The claim's name lets its node complete
    /// or give back only its own claim: a retry of the same request on another node has the
    /// same fingerprint.
    static let idempotencyClaim = RedisScript("""
        local entry = redis.call('GET', KEYS[1])
        if entry then return entry end
        redis.call('SET', KEYS[1], 'p:' .. ARGV[1] .. ':' .. ARGV[5], 'PX', ARGV[2])
        redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[2]))
        local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
        if over > 0 then
          for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do redis.call('DEL', old) end
          redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
        end
        return false
        """)

    /// KEYS: the key's entry. ARGV: fingerprint (hex), the claim's name, the answer
    /// (`<status>:<body>`). Stores the answer, keeping the entry's expiry, if the entry is still
    /// this claim, pending.
    static let idempotencyComplete = RedisScript("""
        if redis.call('GET', KEYS[1]) == 'p:' .. ARGV[1] .. ':' .. ARGV[2] then
          redis.call('SET', KEYS[1], 'd:' .. ARGV[1] .. ':' .. ARGV[3], 'KEEPTTL')
        end
        return 1
        """)

    /// KEYS: the key's entry. ARGV: fingerprint (hex), the claim's name. Forgets the claim if it
    /// is still pending.
    static let idempotencyRelease = RedisScript("""
        if redis.call('GET', KEYS[1]) == 'p:' .. ARGV[1] .. ':' .. ARGV[2] then redis.call('DEL', KEYS[1]) end
        return 1
        """)
}

/// A Lua script and its SHA-1, so that it is sent by digest (`EVALSHA`) rather than whole each
/// time: a publish then carries its arguments only.
struct RedisScript: Sendable {
    let source: String
    let sha1: String

    init(_ source: String) {
        self.source = source
        sha1 = RedisIdempotencyStore.hex(SHA1.digest(Array(source.utf8)))
    }
}

extension RedisConnection {
    /// Runs `script`: whole (`EVAL`, which also loads it) the first time on this connection, by
    /// its digest (`EVALSHA`) after that. Redis runs one connection's commands in the order sent,
    /// so every later call finds the script loaded, and the calls run in the order made. (Sent by
    /// digest first, a call refused `NOSCRIPT` and sent again whole would run after calls made
    /// later: a batch of publishes numbered after the next one.) Should Redis lose its scripts
    /// while connected (`SCRIPT FLUSH`), a call refused is sent whole again, and so are the next.
    /// `rest` is what follows the script in `EVAL`: the number of keys, the keys, the arguments.
    @discardableResult
    func eval(_ script: RedisScript, _ rest: RedisArguments, reply: @escaping (RedisReply?) -> Void) -> Bool {
        guard established.contains(script.sha1) else {
            let sent = send(command: rest.command("EVAL", script.source), reply: reply)
            if sent { established.append(script.sha1) }
            return sent
        }
        return send(command: rest.command("EVALSHA", script.sha1)) { [weak self] answer in
            guard case .error(let text)? = answer, text.hasPrefix("NOSCRIPT") else { return reply(answer) }
            guard let self else { return reply(nil) }
            self.established.removeAll { $0 == script.sha1 }
            if !self.eval(script, rest, reply: reply) { reply(nil) }
        }
    }

    @discardableResult
    func eval(_ script: RedisScript, _ rest: [[UInt8]], reply: @escaping (RedisReply?) -> Void) -> Bool {
        eval(script, RedisArguments(rest), reply: reply)
    }

    @discardableResult
    func eval(_ script: RedisScript, _ rest: [String], reply: @escaping (RedisReply?) -> Void) -> Bool {
        eval(script, RedisArguments(rest), reply: reply)
    }
}
