import Glibc
import ReceptionistModel
import ReceptionistSync

/// A receptionist's target that runs nothing until the test calls `drain()`, and then runs the
/// queued jobs on the test's own thread, the one that created it. Its clock moves only when the
/// test calls `advance(by:)`, so a receptionist's cadence is tested without sleeping.
///
/// `StoreFeed` opens its `ThreadBound` box in the receptionist's job, which traps off the thread
/// that created the feed (the hub's); so the test creates the context and the hub, commits, and
/// drains, all on one thread. `enqueue` itself may be called from any thread (the committing one):
/// the queue is behind a lock.
final class ManualContext: ExecutionContext {
    private let jobs = PThreadLock<[@Sendable () -> Void]>([])
    private let enqueued = PThreadLock(0)
    private let owner = pthread_self()
    private let timers = PThreadLock<(now: Double, jobs: [(due: Double, job: @Sendable () -> Void)])>((1000, []))

    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        jobs.withLock { $0.append(job) }
        enqueued.withLock { $0 += 1 }
        return true
    }

    /// Delayed jobs wait for the test's clock (`advance(by:)`), not the machine's.
    func after(_ delaySeconds: Double, _ job: @escaping @Sendable () -> Void) {
        timers.withLock { state in
            state.jobs.append((due: state.now + delaySeconds, job: job))
        }
        enqueued.withLock { $0 += 1 }
    }

    var now: Double { timers.withLock { $0.now } }

    /// Moves the test's clock on, and queues every delayed job now due (run them with `drain`).
    func advance(by seconds: Double) {
        let due: [@Sendable () -> Void] = timers.withLock { state in
            state.now += seconds
            let ready = state.jobs.filter { $0.due <= state.now }
            state.jobs.removeAll { $0.due <= state.now }
            return ready.map(\.job)
        }
        jobs.withLock { $0 += due }
    }

    /// Delayed jobs not yet due.
    var waiting: Int { timers.withLock { $0.jobs.count } }

    /// Jobs queued and not yet run.
    var pending: Int { jobs.withLock { $0.count } }
    /// Jobs ever queued or delayed: a receptionist's wake-ups.
    var wakeups: Int { enqueued.withLock { $0 } }

    /// Runs every queued job, and any they queue, on the calling thread. Returns how many ran.
    @discardableResult
    func drain() -> Int {
        precondition(pthread_equal(owner, pthread_self()) != 0, "drain on the thread that created the context")
        var ran = 0
        while true {
            let batch = jobs.withLock { jobs in
                defer { jobs.removeAll() }
                return jobs
            }
            if batch.isEmpty { return ran }
            for job in batch {
                job()
                ran += 1
            }
        }
    }
}
