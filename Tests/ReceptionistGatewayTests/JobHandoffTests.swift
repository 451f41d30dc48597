import Dispatch
import Foundation
@testable import ReceptionistGateway
import ReceptionistLoop
import ReceptionistModel
import ReceptionistTestSupport
import Synchronization
import Testing

/// `JobHandoff.inOrder(then:)`: the loop hears that a job's work returned, once, after the
/// answer if the work answered before returning, and at once when the job queue refuses it.
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

    @Test func aReplyGivenBeforeTheWorkReturnsComesFirstAndOnce() {
        let events = record(count: 2) { handoff, note in
            handoff.inOrder(then: { note("returned") }).run({ reply in reply("done") }, answer: { note($0) }, whenFull: "full")
        }
        #expect(events == ["done", "returned"])
    }

    @Test func aReplyGivenAfterTheWorkReturnsComesAfterIt() {
        let events = record(count: 2) { handoff, note in
            handoff.inOrder(then: { note("returned") }).run({ reply in
                // Answered from another thread, once the job has returned.
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { reply("done") }
            }, answer: { note($0) }, whenFull: "full")
        }
        #expect(events == ["returned", "done"])
    }

    @Test func aRefusedJobIsAnsweredAndReturnedAtOnce() {
        let events = record(count: 4, threads: 1) { handoff, note in
            // The one job thread is busy and the one queue place taken: the next job is refused.
            let started = DispatchSemaphore(value: 0), gate = DispatchSemaphore(value: 0)
            handoff.run({ reply in started.signal(); gate.wait(); reply("held") }, answer: { note($0) }, whenFull: "full")
            started.wait()
            handoff.run({ reply in reply("queued") }, answer: { note($0) }, whenFull: "full")
            var returned = false
            handoff.inOrder(then: { returned = true }).run({ reply in reply("ran") }, answer: { note($0) }, whenFull: "refused")
            note(returned ? "returned at once" : "not returned")
            gate.signal()
        }
        #expect(events == ["refused", "returned at once", "held", "queued"])
    }
}
