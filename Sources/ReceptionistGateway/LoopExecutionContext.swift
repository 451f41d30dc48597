import ReceptionistLoop
import ReceptionistModel

/// The loop as an execution context for receptionists: work goes through the mailbox, and
/// delayed work runs on one-shot loop timers that do not keep the loop alive.
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
        // The deadline is fixed here, on the calling thread: time the job waits in the mailbox
        // is part of the delay, not added to it (a batch would otherwise be late by the loop's
        // backlog). Clamped to a day: no caller waits longer, and a delay past UInt64 would trap.
        let deadlineMilliseconds = (now + min(86_400, max(0, delaySeconds))) * 1000
        _ = mailbox.post {
            let loop = loop.value
            // Rounded up against the loop's own clock, which lags real time by the turn so far:
            // the timer never fires before the deadline, so a receptionist never exceeds its rate.
            let remaining = (deadlineMilliseconds - Double(loop.nowMilliseconds)).rounded(.up)
            var timer: LoopTimer?
            timer = LoopTimer(loop: loop) {
                timer?.close()
                timer = nil
                job()
            }
            // Delayed work (a rate's next frame, a presence's next flush) never holds the loop:
            // a drained gateway exits with such a timer pending, and the loop closes it.
            timer?.setKeepsLoopAlive(false)
            timer?.start(delayMilliseconds: UInt64(max(0, remaining)))
        }
    }
}
