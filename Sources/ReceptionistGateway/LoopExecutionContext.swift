import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync

/// The loop as an execution context for receptionists: work goes through the mailbox, and
/// periodic work runs on loop timers.
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

    public func every(_ intervalSeconds: Double, _ tick: @escaping @Sendable () -> Void) -> any Cancellable {
        let handle = TimerHandle(mailbox: mailbox)
        let loop = self.loop
        let milliseconds = UInt64(max(1, intervalSeconds * 1000))
        _ = mailbox.post {
            let timer = LoopTimer(loop: loop.value) { tick() }
            timer.start(delayMilliseconds: milliseconds, repeatMilliseconds: milliseconds)
            handle.attach(LoopBound(timer, loop: loop.value))
        }
        return handle
    }

    /// Cancels a loop timer from any thread, even one not yet started.
    private final class TimerHandle: Cancellable {
        private let mailbox: Mailbox
        private let state = PThreadLock<(timer: LoopBound<LoopTimer>?, cancelled: Bool)>((nil, false))

        init(mailbox: Mailbox) {
            self.mailbox = mailbox
        }

        /// Loop thread.
        func attach(_ timer: LoopBound<LoopTimer>) {
            let cancelled = state.withLock { state in
                state.timer = timer
                return state.cancelled
            }
            if cancelled { timer.value.close() }
        }

        func cancel() {
            let timer = state.withLock { state in
                state.cancelled = true
                return state.timer
            }
            guard let timer else { return }
            _ = mailbox.post { timer.value.close() }
        }
    }
}
