import DequeModule
import ReceptionistSync

/// A fixed pool of job threads that run store mutations, and the periodic jobs (such as
/// `animate`) that feed them.
///
/// Invariants:
/// - The pool never grows: `threads` workers take work from one queue in order.
/// - The queue is bounded (`maxQueuedWork`): `submit` refuses work past it rather than grow.
/// - Periodic jobs never own a thread; a ticker thread asks each for its due slices every
///   `tickSeconds` and queues them, so one-shot work interleaves with them.
/// - Jobs are bounded: at most `maxRunningJobs` run, and the newest `keptFinishedJobs` that have
///   stopped or failed are kept to be read; older ones are forgotten.
///
/// Any thread.
public final class JobRunner: Sendable {
    public let threads: Int
    public let maxQueuedWork: Int
    public let tickSeconds: Double

    private struct Queue {
        /// Work waiting. A closure taken is gone from here at once: what it holds (a reply, a
        /// request's body) is freed when it has run, never kept until later work moves past it.
        var work = Deque<@Sendable () -> Void>()
        var shuttingDown = false
        var count: Int { work.count }
    }

    private struct Jobs {
        var byID: [String: AnimateJob] = [:]
        /// The jobs the ticker still takes as running; it moves each that has ended to `finished`.
        var running: [AnimateJob] = []
        /// Ended jobs' ids, oldest first.
        var finished = Deque<String>()
        var nextID = 1
        var stopping = false
    }

    /// The most jobs running at once.
    public static let maxRunningJobs = 256
    /// How many ended jobs stay readable.
    public static let keptFinishedJobs = 1000

    private let queue = ConditionLock(Queue())
    private let jobs = ConditionLock(Jobs())
    private let workers = PThreadLock<[WorkerThread]>([])

    public init(threads: Int, maxQueuedWork: Int = 65_536, tickSeconds: Double = 0.005) {
        self.threads = max(1, threads)
        self.maxQueuedWork = maxQueuedWork
        self.tickSeconds = tickSeconds
        var started: [WorkerThread] = []
        for _ in 0..<self.threads {
            started.append(WorkerThread.start { [queue] in Self.work(queue) })
        }
        started.append(WorkerThread.start { [weak self] in self?.tick() })
        workers.withLock { $0 = started }
    }

    /// Queues one-shot work for a job thread. Returns false when the queue is full or shut down.
    public func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        let accepted = queue.withLock { queue in
            guard !queue.shuttingDown, queue.count < maxQueuedWork else { return false }
            queue.work.append(work)
            return true
        }
        if accepted { queue.broadcast() }
        return accepted
    }

    private static func work(_ queue: ConditionLock<Queue>) {
        while true {
            let next: (@Sendable () -> Void)? = queue.wait(
                until: { $0.count > 0 || $0.shuttingDown },
                then: { queue in
                    queue.work.popFirst()
                })
            guard let next else { return }
            next()
        }
    }

    // MARK: Periodic jobs

    /// Starts recoloring `store` at `rate` change sets per second; nil when `maxRunningJobs` run.
    public func startAnimate(store: ModelStore, rate: Double) -> AnimateJob? {
        jobs.withLock { jobs in
            guard jobs.running.count < Self.maxRunningJobs else { return nil }
            let id = "job-\(jobs.nextID)"
            jobs.nextID += 1
            let job = AnimateJob(id: id, store: store, rate: rate, seed: UInt64(jobs.nextID) &* 0x9E37_79B9_7F4A_7C15)
            jobs.byID[id] = job
            jobs.running.append(job)
            return job
        }
    }

    public func job(_ id: String) -> AnimateJob? {
        jobs.withLock { $0.byID[id] }
    }

    /// Every job, oldest first.
    public var allJobs: [AnimateJob] {
        jobs.withLock { $0.byID.values.sorted { $0.id.count == $1.id.count ? $0.id < $1.id : $0.id.count < $1.id.count } }
    }

    private func tick() {
        while true {
            let stop: Bool = jobs.wait(seconds: tickSeconds, until: { $0.stopping }, then: { jobs, stopping in stopping })
            if stop { return }
            let now = Clock.monotonicSeconds()
            var ended: [AnimateJob] = []
            for job in jobs.withLock({ $0.running }) {
                guard job.isRunning else {
                    ended.append(job)
                    continue
                }
                for slice in job.dueSlices(now: now, threads: threads) {
                    if !submit({ job.run(slice: slice) }) {
                        job.run(slice: 0)  // give the slice's place back
                    }
                }
            }
            if !ended.isEmpty { forget(ended) }
        }
    }

    /// Moves jobs that have ended out of the running list, and forgets the oldest ended ones past
    /// `keptFinishedJobs`.
    private func forget(_ ended: [AnimateJob]) {
        let ids = Set(ended.map(\.id))
        jobs.withLock { jobs in
            jobs.running.removeAll { ids.contains($0.id) }
            for job in ended { jobs.finished.append(job.id) }
            while jobs.finished.count > Self.keptFinishedJobs, let oldest = jobs.finished.popFirst() {
                jobs.byID[oldest] = nil
            }
        }
    }

    /// Stops every job at a change-set boundary and lets queued work finish, then joins the
    /// threads. Blocks: never call it on a thread the jobs may wait for (the loop's); use
    /// `shutDown(then:)` there.
    public func shutDown() {
        beginShutDown()
        for worker in workers.withLock({ $0 }) { worker.join() }
        workers.withLock { $0 = [] }
    }

    /// Stops every job at a change-set boundary and lets queued work finish, without waiting:
    /// `done` runs on a thread of its own once every job thread has ended. The caller's thread
    /// goes on serving meanwhile, so a job that waits on it (a receptionist's backpressure onto
    /// the loop, a reply posted to it) can finish; joining on that thread could deadlock.
    public func shutDown(then done: @escaping @Sendable () -> Void) {
        beginShutDown()
        WorkerThread.start { [self] in
            shutDown()
            done()
        }.detach()
    }

    private func beginShutDown() {
        for job in allJobs { job.stop() }
        jobs.withLock { $0.stopping = true }
        jobs.broadcast()
        queue.withLock { $0.shuttingDown = true }
        queue.broadcast()
    }
}
