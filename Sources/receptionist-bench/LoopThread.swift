import ReceptionistGateway
import ReceptionistLoop
import ReceptionistSync

/// An `EventLoop` running on a thread of its own, for a benchmark that drives it from others.
///
/// Any thread, except where noted.
final class LoopThread: Sendable {
    let mailbox: Mailbox
    /// The loop as a receptionist's target.
    let context: LoopExecutionContext
    private let thread: WorkerThread

    init() {
        let handoff = ConditionLock<LoopExecutionContext?>(nil)
        let mailboxHandoff = ConditionLock<Mailbox?>(nil)
        thread = WorkerThread.start {
            let loop = try! EventLoop()
            mailboxHandoff.withLock { $0 = loop.mailbox }
            handoff.withLock { $0 = LoopExecutionContext(loop: loop) }
            handoff.broadcast()
            loop.run()
        }
        context = handoff.wait(until: { $0 != nil }, then: { $0! })
        mailbox = mailboxHandoff.withLock { $0! }
    }

    /// Shuts the mailbox, which lets the loop run out of handles, and joins the thread.
    func stop() {
        let mailbox = self.mailbox
        _ = mailbox.post { mailbox.shutDown() }
        thread.join()
    }
}
