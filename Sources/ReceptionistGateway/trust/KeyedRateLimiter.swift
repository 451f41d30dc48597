/// One token bucket per key (an API key or a client address), for publishes.
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
    }

    func take(_ key: String, now: UInt64) -> Answer {
        guard limit.perSecond > 0 else { return .allowed }
        if buckets[key] == nil {
            if buckets.count >= maxKeys {
                buckets = buckets.filter { !$0.value.isFull(now: now) }
            }
            guard buckets.count < maxKeys else { return .limited(retryAfterSeconds: 1) }
            buckets[key] = limit.bucket(now: now)
        }
        if limit.take(&buckets[key]!, now: now) { return .allowed }
        return .limited(retryAfterSeconds: buckets[key]!.secondsUntilNext(rate: limit.perSecond, burst: limit.burst, now: now))
    }
}
