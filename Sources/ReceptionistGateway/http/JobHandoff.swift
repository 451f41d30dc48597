import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// Work that runs on a job thread and answers later, from whichever thread hears back (a
/// replicated store's commit is answered when Redis has taken it): no thread waits for the
/// answer, and the answer reaches the loop through the mailbox, the one door.
struct JobHandoff: Sendable {
    let jobs: JobRunner
    let mailbox: Mailbox

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
        let accepted = jobs.submit {
            work { reply in
                // If the loop has shut down the connection is gone too; the reply has no reader.
                _ = mailbox.post { back.value(reply) }
            }
        }
        if !accepted { answer(whenFull) }
    }
}
