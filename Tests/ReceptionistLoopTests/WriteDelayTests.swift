import ReceptionistLoop
import Testing

@Suite struct WriteDelayTests {
    private func run(_ delay: inout WriteDelay, writes: Int, from start: UInt64, for milliseconds: UInt64) {
        for _ in 0..<writes { delay.noteWrite() }
        delay.tick(now: start + milliseconds)
    }

    @Test func anIdleLoopSendsAtOnce() {
        var delay = WriteDelay(maxDelayMilliseconds: 2, busyWritesPerSecond: 20_000)
        delay.tick(now: 1_000)
        run(&delay, writes: 1_000, from: 1_000, for: 100)  // 10,000 writes a second
        #expect(!delay.isActive)
    }

    @Test func aBusyLoopDelaysUntilItIsQuietAgain() {
        var delay = WriteDelay(maxDelayMilliseconds: 2, busyWritesPerSecond: 20_000)
        delay.tick(now: 0)
        run(&delay, writes: 2_000, from: 0, for: 100)  // 20,000 a second: busy
        #expect(delay.isActive)
        run(&delay, writes: 500, from: 100, for: 50)  // the window is not over: no new decision
        #expect(delay.isActive)
        run(&delay, writes: 700, from: 150, for: 60)  // 1,200 in 110 ms: under the threshold, over half
        #expect(delay.isActive, "once on, it stays on down to half the threshold")
        run(&delay, writes: 500, from: 210, for: 100)  // 5,000 a second: quiet
        #expect(!delay.isActive)
    }

    @Test func noDelayConfiguredNeverDelays() {
        var delay = WriteDelay(maxDelayMilliseconds: 0, busyWritesPerSecond: 1)
        delay.tick(now: 0)
        run(&delay, writes: 100_000, from: 0, for: 100)
        #expect(!delay.isActive)
    }

    @Test func theDelayIsAsLongAsTheLastFlushTookWithinOneMillisecondAndTheBound() {
        var delay = WriteDelay(maxDelayMilliseconds: 10)
        #expect(delay.delayMilliseconds == 1, "before any flush")
        for (took, expected): (UInt64, UInt64) in [
            (0, 1), (300_000, 1), (1_000_000, 1), (1_000_001, 2), (6_400_000, 7), (10_000_000, 10), (250_000_000, 10),
            (2_000_000, 2),
        ] {
            delay.flushed()
            delay.flushTook(nanoseconds: took)
            #expect(delay.delayMilliseconds == expected, "a flush of \(took) ns")
            #expect(delay.wait(now: 5_000) == 5_000 + expected)
        }
        var none = WriteDelay(maxDelayMilliseconds: 0)
        none.flushTook(nanoseconds: 50_000_000)
        #expect(none.delayMilliseconds == 0)
    }

    /// However writes come and however long flushes take, on the test's clock: each connection
    /// that starts to wait is flushed by a flush due no later than its own start plus the bound,
    /// and one flush is set at a time.
    @Test func noConnectionWaitsPastTheDelay() {
        let bound: UInt64 = 10
        var delay = WriteDelay(maxDelayMilliseconds: bound)
        var generator = SystemRandomNumberGenerator()
        var now: UInt64 = 10_000
        var armed: UInt64?
        var waitingSince: [UInt64] = []
        for _ in 0..<10_000 {
            now += UInt64.random(in: 0...1, using: &generator)
            if let due = armed, now >= due {
                // The loop's timer fires: every waiting connection is flushed, within its bound.
                for start in waitingSince { #expect(due - start <= bound, "waited \(due - start) ms") }
                delay.flushed()
                delay.flushTook(nanoseconds: UInt64.random(in: 0...30_000_000, using: &generator))
                armed = nil
                waitingSince = []
            }
            if Bool.random(using: &generator) {
                waitingSince.append(now)
                if let due = delay.wait(now: now) {
                    #expect(armed == nil, "one flush is set at a time")
                    #expect(due == now + delay.delayMilliseconds && due <= now + bound)
                    armed = due
                } else {
                    #expect(armed != nil && armed! <= now + bound, "a later wait joins a flush due sooner")
                }
            }
        }
    }
}
