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

    /// However writes come, on the test's clock: each connection that starts to wait is flushed
    /// by a flush due no later than its own start plus the delay, and one flush is set at a time.
    @Test func noConnectionWaitsPastTheDelay() {
        var delay = WriteDelay(maxDelayMilliseconds: 2)
        var generator = SystemRandomNumberGenerator()
        var now: UInt64 = 10_000
        var armed: UInt64?
        var waitingSince: [UInt64] = []
        for _ in 0..<10_000 {
            now += UInt64.random(in: 0...1, using: &generator)
            if let due = armed, now >= due {
                // The loop's timer fires: every waiting connection is flushed, within its bound.
                for start in waitingSince { #expect(due - start <= 2, "waited \(due - start) ms") }
                delay.flushed()
                armed = nil
                waitingSince = []
            }
            if Bool.random(using: &generator) {
                waitingSince.append(now)
                if let due = delay.wait(now: now) {
                    #expect(armed == nil, "one flush is set at a time")
                    #expect(due == now + 2)
                    armed = due
                } else {
                    #expect(armed != nil && armed! <= now + 2, "a later wait joins a flush due sooner")
                }
            }
        }
    }
}
