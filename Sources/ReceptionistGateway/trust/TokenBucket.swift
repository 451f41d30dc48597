/// A token bucket: `rate` tokens a second, holding at most `burst`. A pure value; time is given.
///
/// A rate of zero or less means no limit.
struct TokenBucket: Sendable {
    private(set) var tokens: Double
    private var lastMilliseconds: UInt64

    init(burst: Double, now: UInt64) {
        tokens = burst
        lastMilliseconds = now
    }

    /// Takes one token if there is one, refilling first for the time since the last take.
    mutating func take(rate: Double, burst: Double, now: UInt64) -> Bool {
        guard rate > 0 else { return true }
        refill(rate: rate, burst: burst, now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Seconds until a token is there again (for `Retry-After`), at least one.
    func secondsUntilNext(rate: Double) -> Int {
        guard rate > 0 else { return 0 }
        return max(1, Int(((1 - tokens) / rate).rounded(.up)))
    }

    /// Whether the bucket has refilled to the top, so forgetting it changes nothing.
    func isFull(rate: Double, burst: Double, now: UInt64) -> Bool {
        var copy = self
        copy.refill(rate: rate, burst: burst, now: now)
        return copy.tokens >= burst
    }

    private mutating func refill(rate: Double, burst: Double, now: UInt64) {
        let elapsed = Double(now &- lastMilliseconds) / 1000
        lastMilliseconds = now
        tokens = min(burst, tokens + elapsed * rate)
    }
}
