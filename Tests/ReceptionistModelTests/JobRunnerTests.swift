import ReceptionistModel
import ReceptionistSync
import Testing

@Suite struct JobRunnerTests {
    /// A job waiting on the thread that shuts the runner down (as a committing job may wait on
    /// the loop) must not deadlock the shutdown: `shutDown(then:)` returns at once, the caller
    /// goes on and lets the job finish, and only then is `done` called.
    @Test func shuttingDownDoesNotWaitOnTheCallersThread() {
        let runner = JobRunner(threads: 1)
        let released = ConditionLock((job: false, running: false))
        let finished = ConditionLock((job: false, done: false))
        #expect(runner.submit {
            released.withLock { $0.running = true }
            released.broadcast()
            // Waits for this test's thread, as a job waits for the loop.
            released.wait(until: { $0.job }, then: { _ in })
            finished.withLock { $0.job = true }
        })
        released.wait(until: { $0.running }, then: { _ in })
        runner.shutDown {
            finished.withLock { $0.done = true }
            finished.broadcast()
        }
        // Still here: the caller was not made to wait for the job it holds up.
        #expect(!finished.withLock { $0.done })
        #expect(!runner.submit {}, "no work is taken once shutting down")
        released.withLock { $0.job = true }
        released.broadcast()
        let state = finished.wait(seconds: 10, until: { $0.done }, then: { value, _ in value })
        #expect(state.job && state.done, "queued work finishes before done is called")
    }
}
