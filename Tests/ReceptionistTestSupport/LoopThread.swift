import Dispatch
import Foundation
import Glibc
import ReceptionistLoop
import Synchronization

/// Runs an `EventLoop` on its own thread for a test, with a setup step on that thread.
public final class LoopThread: Sendable {
    public let mailbox: Mailbox
    public let threadID: pthread_t
    private let finished = DispatchSemaphore(value: 0)

    /// `setup` runs on the loop thread before the loop starts, and can hand what it makes back to
    /// the test (through a lock of the test's own).
    public init(setup: @escaping @Sendable (EventLoop) -> Void = { _ in }) {
        let handoff = Mutex<(Mailbox, pthread_t)?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let finished = self.finished
        let thread = Thread {
            let loop = try! EventLoop()
            setup(loop)
            handoff.withLock { $0 = (loop.mailbox, pthread_self()) }
            ready.signal()
            loop.run()
            finished.signal()
        }
        thread.start()
        ready.wait()
        (mailbox, threadID) = handoff.withLock { $0! }
    }

    public var isLoopThread: Bool { pthread_equal(pthread_self(), threadID) != 0 }

    /// Waits for the loop to return, at most `seconds`. Returns false on time-out.
    public func waitUntilStopped(seconds: Double) -> Bool {
        finished.wait(timeout: .now() + seconds) == .success
    }
}
