import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// Work that runs on a job thread and answers later, from whichever thread hears back (a
/// replicated store's commit is answered when Redis has taken it): no thread waits for the
/// answer, and the answer reaches the loop through the mailbox, the one door.
///
/// A handoff made `inOrder(then:)` also tells the loop when the work has returned on its job
/// thread: by then a commit has its place in its store's order (applied, journaled, or queued for
/// the shared log), so a connection that waits for it before starting its next request keeps
/// its requests' order, though the pool runs jobs side by side.
struct JobHandoff: Sendable {
    let jobs: JobRunner
    let mailbox: Mailbox
    /// Run on the loop once the work has returned (or was refused); nil when nothing waits.
    private let returned: ThreadBound<() -> Void>?

    init(jobs: JobRunner, mailbox: Mailbox) {
        self.init(jobs: jobs, mailbox: mailbox, returned: nil)
    }

    private init(jobs: JobRunner, mailbox: Mailbox, returned: ThreadBound<() -> Void>?) {
        self.jobs = jobs
        self.mailbox = mailbox
        self.returned = returned
    }

    /// Loop thread: this handoff, calling `returned` on the loop once its work has returned on
    /// its job thread, or at once if the job queue refused it.
    func inOrder(then returned: @escaping () -> Void) -> JobHandoff {
        JobHandoff(jobs: jobs, mailbox: mailbox, returned: ThreadBound(returned))
    }

    /// Loop thread: runs `work` on a job thread. `work` gives its reply, once, to the door it is
    /// handed, from any thread; `answer` then gets it on the loop. A full job queue is answered
    /// 503 at once.
    func run(_ work: @escaping @Sendable (_ reply: @escaping @Sendable (Reply) -> Void) -> Void, answer: @escaping (Reply) -> Void) {
        run(work, answer: answer, whenFull: .error(.overCapacity, "the job queue is full; retry later"))
    }

    /// As `run`, for any answer: `whenFull` is given at once if the job queue is full.
    func run<Answer: Sendable>(
        _ work: @escaping @Sendable (_ reply: @escaping @Sendable (Answer) -> Void) -> Void, answer: @escaping (Answer) -> Void,
        whenFull: Answer
    ) {
        let back = ThreadBound(answer)
        let mailbox = self.mailbox
        let accepted: Bool
        if let returned {
            accepted = jobs.submit {
                // A reply given before `work` returns (a store in memory) rides in one post with
                // the news that it returned; one given later goes on its own.
                let early = EarlyReply<Answer>()
                work { reply in
                    if !early.keep(reply) { _ = mailbox.post { back.value(reply) } }
                }
                let reply = early.close()
                _ = mailbox.post {
                    if let reply { back.value(reply) }
                    returned.value()
                }
            }
        } else {
            accepted = jobs.submit {
                work { reply in
                    // If the loop has shut down the connection is gone too; the reply has no reader.
                    _ = mailbox.post { back.value(reply) }
                }
            }
        }
        if !accepted {
            answer(whenFull)
            returned?.value()
        }
    }
}

/// A reply given while its work is still running, kept to be sent with the news that the work
/// returned. Any thread; the lock orders `keep` against `close`.
private final class EarlyReply<Answer: Sendable>: Sendable {
    private let state = PThreadLock<(closed: Bool, reply: Answer?)>((false, nil))

    /// Keeps `reply` if the work has not returned yet; false when it has (send it now).
    func keep(_ reply: Answer) -> Bool {
        state.withLock { state in
            if state.closed { return false }
            state.reply = reply
            return true
        }
    }

    /// The work returned: the reply kept, if any; later replies are not kept.
    func close() -> Answer? {
        state.withLock { state in
            state.closed = true
            return state.reply
        }
    }
}
