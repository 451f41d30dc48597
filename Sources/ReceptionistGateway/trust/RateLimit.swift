/// A rate and a burst, as configured; a rate of zero means unlimited.
public struct RateLimit: Sendable, Equatable {
    public var perSecond: Double
    public var burst: Double

    public init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = max(1, burst)
    }

    public static let unlimited = RateLimit(perSecond: 0, burst: 1)

    func bucket(now: UInt64) -> TokenBucket { TokenBucket(now: now) }

    func take(_ bucket: inout TokenBucket, now: UInt64) -> Bool {
        bucket.take(rate: perSecond, burst: burst, now: now)
    }
}
