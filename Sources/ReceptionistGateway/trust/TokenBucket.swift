/// A token bucket: `rate` tokens a second, holding at most `burst`. A pure value; time is given.
///
/// Kept as one instant, as the generic cell rate algorithm keeps it: when the bucket will be full
/// again. At `now` it holds `burst - (fullAt - now) × rate` tokens (all `burst` once `fullAt` has
/// passed); a take moves `fullAt` one token's interval later, and is allowed while the bucket still
/// holds a whole token, that is while `fullAt - now ≤ (burst - 1) / rate`. One word where a count
/// and a time took two: every WebSocket connection holds a bucket.
///
/// A rate of zero or less means no limit.
struct TokenBucket: Sendable {
    /// When the bucket is full again, in nanoseconds of the loop's clock (its milliseconds × 10⁶,
    /// which a `UInt64` holds for 584 years). At or before now: full.
    private var fullAt: UInt64

    /// A full bucket.
    init(now: UInt64) {
        fullAt = Self.nanoseconds(now)
    }

    /// Takes `count` tokens if there are that many, or none.
    mutating func take(_ count: Int = 1, rate: Double, burst: Double, now: UInt64) -> Bool {
        guard rate > 0, count > 0 else { return true }
        let now = Self.nanoseconds(now)
        let interval = 1e9 / rate
        let start = max(fullAt, now)
        guard Double(start - now) + Double(count - 1) * interval <= (burst - 1) * interval else { return false }
        // Saturated: at a rate as slow as 10⁻¹² a second, one token's interval is past what a
        // `UInt64` of nanoseconds holds; such a bucket is simply never full again.
        let later = (interval * Double(count)).rounded()
        let (sum, overflowed) = later < 1.8e19 ? start.addingReportingOverflow(UInt64(later)) : (.max, true)
        fullAt = overflowed ? .max : sum
        return true
    }

    /// Seconds until `count` tokens are there again (for `Retry-After`), at least one: a batch
    /// waits for all it asks, not for one.
    func secondsUntilNext(_ count: Int = 1, rate: Double, burst: Double, now: UInt64) -> Int {
        guard rate > 0 else { return 0 }
        let owed = Double(fullAt) - Double(Self.nanoseconds(now)) - (burst - Double(count)) * 1e9 / rate
        return max(1, Int(min((owed / 1e9).rounded(.up), Double(Int32.max))))
    }

    /// Whether the bucket has refilled to the top, so forgetting it changes nothing.
    func isFull(now: UInt64) -> Bool {
        fullAt <= Self.nanoseconds(now)
    }

    private static func nanoseconds(_ milliseconds: UInt64) -> UInt64 {
        milliseconds &* 1_000_000
    }
}
