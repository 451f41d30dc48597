import Glibc
import Synchronization

/// A request or message whose job-thread work what follows it on its connection waits for
/// (invariant 58). It ends when the work has returned or the request is answered, whichever the
/// loop hears of first. The loop asks to hear of the return only once something waits
/// (`whenEnded`), so a client with one request in flight costs no extra post.
///
/// The job thread tells it that the work returned (`returned`), and hands it a reply given before
/// that (`keep`), to be posted with the news.
///
/// Why `@unchecked Sendable` is safe: `JobHandoff` carries the hold to the job thread, which
/// touches only `shared`, under its mutex; every other member traps unless called on the thread
/// that made the hold (the loop), as `ThreadBound` does.
final class JobHold: @unchecked Sendable {
    private struct Shared {
        var returned = false
        var waiting = false
        /// The work returned with a reply, whose post ends the hold once the reply is in.
        var endPosted = false
        var kept: (@Sendable () -> Void)?
    }

    // A `Mutex` held inline, not a `PThreadLock`: one hold is made per job, its two threads meet
    // on it about once each, and inline it costs no allocation of its own.
    private let shared = Mutex(Shared())
    private let thread = pthread_self()
    private var started = false
    private var isEnded = false
    private var resume: (() -> Void)?

    private func checkThread() {
        precondition(pthread_equal(pthread_self(), thread) != 0, "a job hold was used off its loop")
    }

    var ended: Bool {
        checkThread()
        return isEnded
    }

    /// `JobHandoff` started the job.
    func start() {
        checkThread()
        started = true
        if resume != nil, !askForReturn() { end() }
    }

    /// True when `resume` will run once the hold ends; false when it has ended already.
    func whenEnded(_ resume: @escaping () -> Void) -> Bool {
        checkThread()
        guard !isEnded else { return false }
        precondition(self.resume == nil, "a job hold waited for twice")
        if started, !askForReturn() {
            end()
            return false
        }
        self.resume = resume
        return true
    }

    /// Loop: false when the work has returned already and its reply, if any, is in; else the
    /// job thread posts `end` when it returns, or has posted it with the reply. A reply still on
    /// its way holds what follows too: the connection's queue must count it before the next
    /// request is weighed against its limit.
    private func askForReturn() -> Bool {
        shared.withLock { shared in
            if shared.endPosted { return true }
            if shared.returned { return false }
            shared.waiting = true
            return true
        }
    }

    /// Loop: the hold is over, as the work returned, the request was answered (its work, if it
    /// ran any, returned: a reply given before that is posted with the news), or the job was
    /// refused. What waited goes on.
    func end() {
        checkThread()
        guard !isEnded else { return }
        isEnded = true
        let resume = self.resume
        self.resume = nil
        resume?()
    }

    /// Job thread: keeps `deliver` to be posted with the news of the return; false when the work
    /// has returned already (post it now).
    func keep(_ deliver: @escaping @Sendable () -> Void) -> Bool {
        shared.withLock { shared in
            if shared.returned { return false }
            shared.kept = deliver
            return true
        }
    }

    /// Job thread: the work returned. The delivery kept, if any, and whether to post `end` with
    /// it: when the loop waits, or a reply was kept (a wait asked before that post arrives
    /// waits for it).
    func returned() -> (kept: (@Sendable () -> Void)?, postEnd: Bool) {
        shared.withLock { shared in
            shared.returned = true
            shared.endPosted = shared.waiting || shared.kept != nil
            defer { shared.kept = nil }
            return (shared.kept, shared.endPosted)
        }
    }

    /// Job thread or test: whether the work has returned.
    var hasReturned: Bool { shared.withLock { $0.returned } }
}
