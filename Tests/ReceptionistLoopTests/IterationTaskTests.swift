import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

@Suite struct IterationTaskTests {
    /// A task scheduled from a timer, with nothing else to wake the loop, still runs in that turn
    /// (the poll must not block on it), and runs once however often it was scheduled.
    @Test(.timeLimit(.minutes(10)))
    func aTaskScheduledTwiceRunsOnceInTheSameTurn() {
        let runs = Mutex(0)
        let loop = LoopThread { loop in
            var timer: LoopTimer?
            var task: IterationTask?
            task = IterationTask(loop: loop) {
                runs.withLock { $0 += 1 }
                timer?.close()
                timer = nil
                loop.mailbox.shutDown()
            }
            timer = LoopTimer(loop: loop) {
                task?.schedule()
                task?.schedule()
            }
            timer?.start(delayMilliseconds: 1)
        }
        #expect(loop.waitUntilStopped(seconds: 10))
        #expect(runs.withLock { $0 } == 1)
    }
}
