import Glibc

/// Wall-clock time for commit and publish stamps, and a monotonic clock for rates. Any thread.
public enum Clock {
    public static func microsecondsSinceEpoch() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }

    public static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1_000_000_000
    }
}
