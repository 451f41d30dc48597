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
}
