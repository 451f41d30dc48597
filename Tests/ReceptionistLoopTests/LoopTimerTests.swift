import Dispatch
import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

@Suite struct LoopTimerTests {
    @Test(.timeLimit(.minutes(10)))
    func repeatingTimerFiresThenClosesAndTheLoopEnds() {
        let fired = Mutex(0)
        let loop = LoopThread { loop in
            var timer: LoopTimer?
            timer = LoopTimer(loop: loop) {
                let count = fired.withLock { value in
                    value += 1
                    return value
                }
                if count == 5 {
                    timer?.close()
                    timer = nil
                    loop.mailbox.shutDown()
                }
            }
            timer?.start(delayMilliseconds: 1, repeatMilliseconds: 1)
        }
        #expect(loop.waitUntilStopped(seconds: 10))
        #expect(fired.withLock { $0 } == 5)
    }

    /// A timer that does not keep the loop alive does not hold its end: the loop runs out with it
    /// pending, closes it (the loop is released with no handle open), and its work never runs.
    @Test(.timeLimit(.minutes(10)))
    func aTimerThatDoesNotKeepTheLoopAliveIsClosedWhenTheLoopEnds() {
        let fired = Mutex(false)
        let loop = LoopThread { loop in
            let timer = LoopTimer(loop: loop) { fired.withLock { $0 = true } }
            timer.setKeepsLoopAlive(false)
            timer.start(delayMilliseconds: 100_000)
            loop.mailbox.shutDown()
        }
        #expect(loop.waitUntilStopped(seconds: 10))
        #expect(!fired.withLock { $0 })
    }
}
