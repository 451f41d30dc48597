import Glibc
import ReceptionistModel
import ReceptionistSync

/// A receptionist's target that runs nothing until the test calls `drain()`, and then runs the
/// queued jobs on the test's own thread, the one that created it.
///
/// `StoreFeed` opens its `ThreadBound` box in the receptionist's job, which traps off the thread
/// that created the feed (the hub's); so the test creates the context and the hub, commits, and
/// drains, all on one thread. `enqueue` itself may be called from any thread (the committing one):
/// the queue is behind a lock.
final class ManualContext: ExecutionContext {
    private let jobs = PThreadLock<[@Sendable () -> Void]>([])
    private let enqueued = PThreadLock(0)
    private let owner = pthread_self()

    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        jobs.withLock { $0.append(job) }
        enqueued.withLock { $0 += 1 }
        return true
    }

    /// The push core asks for no timer (its receptionists run `each`); a test that needs one fails.
    func every(_ intervalSeconds: Double, _ tick: @escaping @Sendable () -> Void) -> any Cancellable {
        preconditionFailure("ManualContext has no timers")
    }

    /// Jobs queued and not yet run.
    var pending: Int { jobs.withLock { $0.count } }
    /// Jobs ever queued: a receptionist's wake-ups.
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
