import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// Work that runs on a job thread and answers later, from whichever thread hears back (a
/// replicated store's commit is answered when Redis has taken it): no thread waits for the
/// answer, and the answer reaches the loop through the mailbox, the one door.
///
/// A handoff made `inOrder` also tells a `JobHold` of each job it runs, so the loop can wait for
/// the work to return on its job thread: by then a commit has its place in its store's order
/// (applied, journaled, or queued for the shared log), so a connection that waits for it before
/// starting its next request keeps its requests' order, though the pool runs jobs side by side.
/// The loop asks only when something waits, so a lone request costs no extra post.
struct JobHandoff: Sendable {
    let jobs: JobRunner
    let mailbox: Mailbox
    /// Told of each job `run` starts; nil when nothing waits.
    private let hold: JobHold?

    init(jobs: JobRunner, mailbox: Mailbox) {
        self.init(jobs: jobs, mailbox: mailbox, hold: nil)
    }

    private init(jobs: JobRunner, mailbox: Mailbox, hold: JobHold?) {
        self.jobs = jobs
        self.mailbox = mailbox
        self.hold = hold
    }

    /// Loop thread: this handoff, telling `hold` of the job it runs (or that it was refused).
    func inOrder(_ hold: JobHold) -> JobHandoff {
        JobHandoff(jobs: jobs, mailbox: mailbox, hold: hold)
    }

    /// Loop thread: runs `work` on a job thread. `work` gives its reply, once, to the door it is
    /// handed, from any thread; `answer` then gets it on the loop. A full job queue is answered
    /// 503 at once.
    func run(_ work: @escaping @Sendable (_ reply: @escaping @Sendable (Reply) -> Void) -> Void, answer: @escaping (Reply) -> Void) {
        run(work, answer: answer, whenFull: .error(.overCapacity, "the job queue is full; retry later"))
    }

    /// Loop thread: as `run`, for work that answers after it has returned (it started a call to
    /// Redis, say): what follows on the connection waits for the answer, not for the return, and
    /// no job thread waits for the answer.
    func runUntilAnswered(_ work: @escaping @Sendable (_ reply: @escaping @Sendable (Reply) -> Void) -> Void, answer: @escaping (Reply) -> Void) {
        let back = ThreadBound(answer)
        let mailbox = self.mailbox
        let accepted = jobs.submit {
            work { reply in _ = mailbox.post { back.value(reply) } }
        }
        if !accepted { answer(.error(.overCapacity, "the job queue is full; retry later")) }
    }

    /// As `run`, for any answer: `whenFull` is given at once if the job queue is full.
    func run<Answer: Sendable>(
        _ work: @escaping @Sendable (_ reply: @escaping @Sendable (Answer) -> Void) -> Void, answer: @escaping (Answer) -> Void,
        whenFull: Answer
    ) {
        let back = ThreadBound(answer)
        let mailbox = self.mailbox
        guard let hold else {
            let accepted = jobs.submit {
                work { reply in
                    // If the loop has shut down the connection is gone too; the reply has no reader.
                    _ = mailbox.post { back.value(reply) }
                }
            }
            if !accepted { answer(whenFull) }
            return
        }
        let accepted = jobs.submit {
            work { reply in
                let deliver: @Sendable () -> Void = { back.value(reply) }
                if !hold.keep(deliver) { _ = mailbox.post(deliver) }
            }
            // A reply given before the work returned, and the news the loop waits for, share one post.
            let (deliver, postEnd) = hold.returned()
            if postEnd { _ = mailbox.post { deliver?(); hold.end() } }
        }
        if !accepted {
            answer(whenFull)
            return hold.end()
        }
        hold.start()
    }
}
