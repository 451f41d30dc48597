import Dispatch
import Foundation
@testable import ReceptionistGateway
import ReceptionistLoop
import ReceptionistModel
import ReceptionistTestSupport
import Synchronization
import Testing

/// `JobHandoff.inOrder` and `JobHold`: a loop that waits hears that a job's work returned, once,
/// with the answer if the work answered before returning; one that does not wait gets the answer
/// alone; a job the queue refuses ends its hold at once.
/// A real loop thread and real job threads; the events are recorded on the loop.
@Suite struct JobHandoffTests {
    /// What reached the loop, in order. Why `@unchecked Sendable` is safe: only closures on the
    /// loop thread append, and the test reads it after the loop has stopped.
    final class Events: @unchecked Sendable {
        var list: [String] = []
    }

    /// Runs `body` on the loop, then stops the loop once `count` events are recorded.
    private func record(count: Int, threads: Int = 2, _ body: @escaping @Sendable (JobHandoff, @escaping (String) -> Void) -> Void) -> [String] {
        let loop = LoopThread()
        let jobs = JobRunner(threads: threads, maxQueuedWork: 1)
        let events = Events()
        let mailbox = loop.mailbox
        _ = mailbox.post {
            body(JobHandoff(jobs: jobs, mailbox: mailbox)) { event in
                events.list.append(event)
                if events.list.count == count { mailbox.shutDown() }
            }
        }
        #expect(loop.waitUntilStopped(seconds: 10))
        jobs.shutDown()
        return events.list
    }

    /// Runs a job in order whose work waits for the loop to have `asked`, then replies through
    /// `reply` (as its work would).
    private func runInOrder(
        _ handoff: JobHandoff, _ hold: JobHold, note: @escaping (String) -> Void, asked: @escaping () -> Void,
        reply: @escaping @Sendable (@escaping @Sendable (String) -> Void) -> Void
    ) {
        let go = DispatchSemaphore(value: 0)
        handoff.inOrder(hold).run({ done in
            go.wait()
            reply(done)
        }, answer: { note($0) }, whenFull: "full")
        asked()
        go.signal()
    }

    @Test func aReplyGivenBeforeTheWorkReturnsComesWithTheNewsThatItReturned() {
        let events = record(count: 3) { handoff, note in
            let hold = JobHold()
            runInOrder(handoff, hold, note: note, asked: {
                note(hold.whenEnded { note("returned") } ? "waiting" : "ended")
            }, reply: { $0("done") })
        }
        #expect(events == ["waiting", "done", "returned"])
    }

    @Test func aReplyGivenAfterTheWorkReturnsComesAfterTheNews() {
        let events = record(count: 3) { handoff, note in
            let hold = JobHold()
            runInOrder(handoff, hold, note: note, asked: {
                note(hold.whenEnded { note("returned") } ? "waiting" : "ended")
            }, reply: { done in
                // Answered from another thread, once the job has returned.
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { done("done") }
            })
        }
        #expect(events == ["waiting", "returned", "done"])
    }

    @Test func aWaitAskedBeforeTheJobStartsEndsWhenItReturns() {
        // A route may read Redis before it runs its job: the connection waits from the start.
        let events = record(count: 3) { handoff, note in
            let hold = JobHold()
            note(hold.whenEnded { note("returned") } ? "waiting" : "ended")
            runInOrder(handoff, hold, note: note, asked: {}, reply: { $0("done") })
        }
        #expect(events == ["waiting", "done", "returned"])
    }

    @Test func withNobodyWaitingTheReplyAndTheNewsShareOnePost() {
        let events = record(count: 3) { handoff, note in
            let hold = JobHold()
            handoff.inOrder(hold).run({ reply in reply("done") }, answer: { reply in
                note(reply)
                // The reply came with the news that the work returned: a wait asked now ends
                // right after the reply, in the same post.
                note(hold.whenEnded { note("returned") } ? "waiting" : "ended")
            }, whenFull: "full")
        }
        #expect(events == ["done", "waiting", "returned"])
    }

    @Test func aWaitAskedOnceTheWorkReturnedEndsOnlyWhenItsReplyIsIn() {
        // The work answered and returned before the loop asked; its reply is still on its way.
        // The wait holds until the reply is in, so the connection counts the reply's bytes
        // before it weighs the next request against its queue's limit. It ended at once, and
        // a client that read nothing was answered far past the limit.
        let events = record(count: 3) { handoff, note in
            let hold = JobHold()
            handoff.inOrder(hold).run({ reply in reply("done") }, answer: { note($0) }, whenFull: "full")
            let deadline = Date().addingTimeInterval(5)
            while !hold.hasReturned, Date() < deadline { usleep(100) }
            #expect(hold.hasReturned, "the work never returned: the wait below would be asked before it")
            note(hold.whenEnded { note("returned") } ? "waiting" : "ended")
        }
        #expect(events == ["waiting", "done", "returned"])
    }

    @Test func aRefusedJobIsAnsweredAndItsHoldEndedAtOnce() {
        let events = record(count: 4, threads: 1) { handoff, note in
            // The one job thread is busy and the one queue place taken: the next job is refused.
            let started = DispatchSemaphore(value: 0), gate = DispatchSemaphore(value: 0)
            handoff.run({ reply in started.signal(); gate.wait(); reply("held") }, answer: { note($0) }, whenFull: "full")
            started.wait()
            handoff.run({ reply in reply("queued") }, answer: { note($0) }, whenFull: "full")
            let hold = JobHold()
            handoff.inOrder(hold).run({ reply in reply("ran") }, answer: { note($0) }, whenFull: "refused")
            note(hold.ended ? "ended at once" : "not ended")
            gate.signal()
        }
        #expect(events == ["refused", "ended at once", "held", "queued"])
    }
}
