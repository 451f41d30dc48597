import Glibc
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

    /// Jobs are bounded: past `maxRunningJobs` running a new one is refused, and of the jobs that
    /// ended only the newest `keptFinishedJobs` stay readable. (Every job stayed for good, and the
    /// ticker sorted all of them every 5 ms: 3,000 stopped jobs cost an idle gateway 0.6 cores.)
    @Test func jobsAreBoundedRunningAndEnded() throws {
        let runner = JobRunner(threads: 1, tickSeconds: 0.001)
        defer { runner.shutDown() }
        let store = ModelStore(name: "s")
        var running: [AnimateJob] = []
        for _ in 0..<JobRunner.maxRunningJobs { running.append(try #require(runner.startAnimate(store: store, rate: 0.01))) }
        #expect(runner.startAnimate(store: store, rate: 0.01) == nil, "past the running limit")
        for job in running { job.stop() }
        // The ticker takes ended jobs out of the running list; new ones then start.
        var batches = [running]
        for _ in 0..<5 {
            let deadline = Clock.monotonicSeconds() + 10
            var batch: [AnimateJob] = []
            while batch.count < JobRunner.maxRunningJobs, Clock.monotonicSeconds() < deadline {
                if let job = runner.startAnimate(store: store, rate: 0.01) { batch.append(job) } else { usleep(1000) }
            }
            #expect(batch.count == JobRunner.maxRunningJobs, "the ended jobs made room")
            for job in batch { job.stop() }
            batches.append(batch)
        }
        let deadline = Clock.monotonicSeconds() + 10
        while runner.allJobs.count > JobRunner.keptFinishedJobs, Clock.monotonicSeconds() < deadline { usleep(1000) }
        let kept = Set(runner.allJobs.map(\.id))
        #expect(kept.count == JobRunner.keptFinishedJobs)
        // The newest ended are kept. A batch ends whole before the next can start, but the jobs of
        // one batch may end in any order (the ticker may see some stopped a tick before others):
        // the last batches are kept whole, the one at the bound in part, the first not at all.
        let whole = JobRunner.keptFinishedJobs / JobRunner.maxRunningJobs
        for batch in batches.suffix(whole) { #expect(batch.allSatisfy { kept.contains($0.id) }, "a recent batch kept whole") }
        let partial = batches[batches.count - whole - 1]
        #expect(partial.filter { kept.contains($0.id) }.count == JobRunner.keptFinishedJobs - whole * JobRunner.maxRunningJobs)
        for batch in batches.prefix(batches.count - whole - 1) { #expect(batch.allSatisfy { !kept.contains($0.id) }, "an old batch forgotten") }
        #expect(runner.job(batches[0][0].id) == nil)
    }

    /// A job on a store deleted under it fails (`noSuchStore`) rather than commit to a store
    /// nobody can read for good.
    @Test func aJobOnADeletedStoreFails() throws {
        let runner = JobRunner(threads: 1, tickSeconds: 0.001)
        defer { runner.shutDown() }
        let stores = StoreRegistry(historyLimit: 10)
        let store = try stores.create("s")
        try store.commit([.put(model: "m", value: ["color": "#000000"])])
        let job = try #require(runner.startAnimate(store: store, rate: 1000))
        try stores.delete("s")
        #expect(throws: StoreError.noSuchStore("s")) { try store.commit([.put(model: "n", value: 1)]) }
        let deadline = Clock.monotonicSeconds() + 10
        while job.isRunning, Clock.monotonicSeconds() < deadline { usleep(1000) }
        #expect(job.info.state == .failed(StoreError.noSuchStore("s").description))
    }

    @Test(arguments: [(models: 0, rate: 1000.0), (models: 1, rate: 0.001)])
    func aJobOnADeletedStoreFailsWithNothingToCommit(models: Int, rate: Double) throws {
        // An empty store gives the job nothing to commit, and a slow rate no commit soon: neither
        // may keep the job running on a store that is gone.
        let runner = JobRunner(threads: 1, tickSeconds: 0.001)
        defer { runner.shutDown() }
        let stores = StoreRegistry(historyLimit: 10)
        let store = try stores.create("s")
        for n in 0..<models { try store.commit([.put(model: "m\(n)", value: ["color": "#000000"])]) }
        let job = try #require(runner.startAnimate(store: store, rate: rate))
        try stores.delete("s")
        let deadline = Clock.monotonicSeconds() + 10
        while job.isRunning, Clock.monotonicSeconds() < deadline { usleep(1000) }
        #expect(job.info.state == .failed(StoreError.noSuchStore("s").description))
    }
}
