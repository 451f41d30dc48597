import Dispatch
import Glibc
import ReceptionistGateway
import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

@Suite struct LoopExecutionContextTests {
    /// A delay counts from the call, not from when the loop got to it: a loop busy for most of the
    /// delay runs the job when the delay is up, not a whole delay after it was free. Never early.
    @Test(.timeLimit(.minutes(10)))
    func aDelayCountsFromTheCallNotFromWhenTheLoopIsFree() {
        let made = Mutex<LoopExecutionContext?>(nil)
        let loop = LoopThread { loop in made.withLock { $0 = LoopExecutionContext(loop: loop) } }
        let context = made.withLock { $0! }
        let blocked = DispatchSemaphore(value: 0)
        #expect(loop.mailbox.post {
            blocked.signal()
            usleep(400_000)
        } == .accepted)
        blocked.wait()
        let start = DispatchTime.now().uptimeNanoseconds
        let ranAt = Mutex<UInt64?>(nil)
        let ran = DispatchSemaphore(value: 0)
        context.after(0.5) {
            ranAt.withLock { $0 = DispatchTime.now().uptimeNanoseconds }
            ran.signal()
        }
        #expect(ran.wait(timeout: .now() + 10) == .success)
        let waited = Double((ranAt.withLock { $0 } ?? start) - start) / 1e9
        #expect(waited >= 0.5)
        // Counted from when the loop was free, it would be 0.4 + 0.5.
        #expect(waited < 0.8)
        let mailbox = loop.mailbox
        #expect(mailbox.post { mailbox.shutDown() } == .accepted)
        #expect(loop.waitUntilStopped(seconds: 10))
    }
}
