/// Delays between reconnection attempts: doubling from `initialMilliseconds` up to
/// `maxMilliseconds`, back to the start after a success.
///
/// Pure value; any thread.
public struct RedisBackoff: Sendable, Equatable {
    public let initialMilliseconds: UInt64
    public let maxMilliseconds: UInt64
    public private(set) var failures = 0

    public init(initialMilliseconds: UInt64 = 50, maxMilliseconds: UInt64 = 2000) {
        self.initialMilliseconds = initialMilliseconds
        self.maxMilliseconds = max(initialMilliseconds, maxMilliseconds)
    }

    /// The delay before the next attempt, counting one more failure.
    public mutating func nextDelayMilliseconds() -> UInt64 {
        let shift = min(failures, 20)
        failures += 1
        return min(maxMilliseconds, initialMilliseconds << UInt64(shift))
    }

    public mutating func reset() {
        failures = 0
    }
}
