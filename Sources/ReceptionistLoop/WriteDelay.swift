/// Decides whether a connection that asks for it (a subscriber's stream) waits a little before
/// its queued frames go to the kernel, so that more of them leave in one writev, and for how long.
///
/// A message fanned out to many subscribers costs one write per subscriber; when publishers send
/// one message per request, each write carries one or two frames, and the writes, not the bytes,
/// are the cost. So while the loop is busy writing (more than `busyWritesPerSecond` writes over
/// the last window) writes wait and leave together; when it is not, they go at once and latency
/// is what it was.
///
/// How long they wait follows what the waiting saves: as long as the last delayed flush took to
/// write (at least 1 ms, at most `maxDelayMilliseconds`). A flush that writes to a thousand
/// sockets keeps the loop from reading for as long as it takes, so every frame already waits
/// about that long for its turn in it; waiting as long again before the next one at most doubles
/// that wait and gathers twice the frames per write. A few subscribers flush in well under a
/// millisecond and wait 1 ms; a fan-out to many waits up to the bound.
///
/// Invariants: no write waits longer than `maxDelayMilliseconds` (plus the loop's own lag); with
/// `maxDelayMilliseconds` 0 nothing ever waits. It switches on at `busyWritesPerSecond` and off
/// below half of it.
///
/// Pure value; the loop that owns it is its clock.
public struct WriteDelay: Sendable, Equatable {
    public let maxDelayMilliseconds: UInt64
    public let busyWritesPerSecond: Int
    /// How often the decision is taken again, from the writes of the window just past.
    public static let windowMilliseconds: UInt64 = 100

    private var windowStart: UInt64?
    private var writes = 0
    public private(set) var isActive = false
    /// When the flush of the connections now waiting is due, if any wait.
    public private(set) var flushDue: UInt64?
    /// How long the next connection to start waiting waits: the last delayed flush's length.
    public private(set) var delayMilliseconds: UInt64

    public init(maxDelayMilliseconds: UInt64, busyWritesPerSecond: Int = 20_000) {
        self.maxDelayMilliseconds = maxDelayMilliseconds
        self.busyWritesPerSecond = busyWritesPerSecond
        delayMilliseconds = min(1, maxDelayMilliseconds)
    }

    /// A connection starts to wait at `now`. Returns when a flush must be set for, if none is set
    /// yet; otherwise the connection joins the one set, which is due sooner than `now` plus the
    /// delay (it was set by an earlier wait), so no connection waits longer than the delay.
    public mutating func wait(now: UInt64) -> UInt64? {
        guard flushDue == nil else { return nil }
        let due = now + delayMilliseconds
        flushDue = due
        return due
    }

    /// The waiting connections are being flushed: a connection that starts to wait from now on
    /// sets the next flush.
    public mutating func flushed() {
        flushDue = nil
    }

    /// The flush took `nanoseconds` of writing: the next wait lasts as long, in whole
    /// milliseconds rounded up, within 1 ms and the bound.
    public mutating func flushTook(nanoseconds: UInt64) {
        let took = nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
        delayMilliseconds = min(maxDelayMilliseconds, max(1, took))
    }

    /// A write reached the kernel.
    public mutating func noteWrite() {
        writes &+= 1
    }

    /// Closes the window when it is due, and decides for the next one.
    public mutating func tick(now: UInt64) {
        guard let start = windowStart else {
            windowStart = now
            return
        }
        let elapsed = now &- start
        guard elapsed >= Self.windowMilliseconds else { return }
        let perSecond = writes * 1000 / Int(max(1, elapsed))
        // Once on, it stays on down to half the threshold: the delay itself lowers the count of
        // writes, and it must not switch off for that alone and back on the window after.
        let threshold = isActive ? busyWritesPerSecond / 2 : busyWritesPerSecond
        isActive = maxDelayMilliseconds > 0 && perSecond >= threshold
        writes = 0
        windowStart = now
    }
}
