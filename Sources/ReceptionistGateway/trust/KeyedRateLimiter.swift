/// One token bucket per key, for publishes: `key <n>` for an API key, `token <subject>` and
/// `client <subject>` for a token's holder, and a client's address as it stands (`127.0.0.1`),
/// which no other kind of key can equal. The address is used as it is because every publish
/// without an API key is counted by it, and a key joined to it cost each one an allocation.
///
/// Loop thread only. The table is bounded: past `maxKeys` it forgets the buckets that have
/// refilled to the top, which changes no answer, and if every bucket is in use it refuses new
/// keys rather than grow.
final class KeyedRateLimiter {
    private let limit: RateLimit
    private let maxKeys: Int
    private var buckets: [String: TokenBucket] = [:]

    init(limit: RateLimit, maxKeys: Int = 65_536) {
        self.limit = limit
        self.maxKeys = maxKeys
    }

    enum Answer: Equatable {
        case allowed
        case limited(retryAfterSeconds: Int)
        /// More than a full bucket holds: no wait lets it through.
        case beyondBurst
    }

    /// Takes `count` tokens from `key`'s bucket, all of them or none (a batch refused spends
    /// nothing of what it asked for), for a request that took `alreadyTaken` before.
    func take(_ key: String, count: Int = 1, alreadyTaken: Int = 0, now: UInt64) -> Answer {
        guard limit.perSecond > 0, count > 0 else { return .allowed }
        guard Double(count + alreadyTaken) <= limit.burst else { return .beyondBurst }
        if buckets[key] == nil {
            if buckets.count >= maxKeys {
                buckets = buckets.filter { !$0.value.isFull(now: now) }
            }
            guard buckets.count < maxKeys else { return .limited(retryAfterSeconds: 1) }
            buckets[key] = limit.bucket(now: now)
        }
        if buckets[key]!.take(count, rate: limit.perSecond, burst: limit.burst, now: now) { return .allowed }
        return .limited(retryAfterSeconds: buckets[key]!.secondsUntilNext(count, rate: limit.perSecond, burst: limit.burst, now: now))
    }
}
