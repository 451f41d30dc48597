import ReceptionistLoop
import ReceptionistModel

/// The loop as an execution context for receptionists: work goes through the mailbox, and
/// delayed work runs on one-shot loop timers.
///
/// Any thread.
public final class LoopExecutionContext: ExecutionContext {
    private let mailbox: Mailbox
    private let loop: LoopBound<EventLoop>

    /// Loop thread only.
    public init(loop: EventLoop) {
        mailbox = loop.mailbox
        self.loop = LoopBound(loop, loop: loop)
    }

    public func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        mailbox.post(job) == .accepted
    }

    public func after(_ delaySeconds: Double, _ job: @escaping @Sendable () -> Void) {
        let loop = self.loop
        // Rounded up: a timer that fired early would let a receptionist deliver above its rate.
        // Clamped to a day: no caller waits longer, and a delay past UInt64 would trap.
        let milliseconds = UInt64(min(86_400_000, max(1, (delaySeconds * 1000).rounded(.up))))
        _ = mailbox.post {
            var timer: LoopTimer?
            timer = LoopTimer(loop: loop.value) {
                timer?.close()
                timer = nil
                job()
            }
            timer?.start(delayMilliseconds: milliseconds)
        }
    }
}
