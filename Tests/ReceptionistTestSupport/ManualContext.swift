import Glibc
import ReceptionistModel
import ReceptionistSync

/// A receptionist's target for unit tests (the model's and the push core's): it runs nothing
/// until the test calls `drain()`, and then runs the queued jobs on the test's own thread, the one
/// that created it. Its clock moves only when the test calls `advance(by:)`, so a receptionist's
/// cadence is tested without sleeping.
///
/// `enqueue` and `after` may be called from any thread (the committing one): the queue and the
/// timers are behind locks. `drain` must run on the creating thread: a push core's store group
/// opens its `ThreadBound` box in the receptionist's job, which traps anywhere else.
public final class ManualContext: ExecutionContext {
    private struct Timer {
        let due: Double
        let job: @Sendable () -> Void
    }

    private let jobs = PThreadLock<[@Sendable () -> Void]>([])
    private let counts = PThreadLock((enqueued: 0, delayed: 0))
    private let timers = PThreadLock<(now: Double, timers: [Timer])>((1000, []))
    /// The delays `after` was asked for, in order.
    private let delays = PThreadLock<[Double]>([])
    private let owner = pthread_self()

    public init() {}

    public func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        jobs.withLock { $0.append(job) }
        counts.withLock { $0.enqueued += 1 }
        return true
    }

    /// Delayed jobs wait for the test's clock (`advance(by:)`), not the machine's.
    public func after(_ delaySeconds: Double, _ job: @escaping @Sendable () -> Void) {
        timers.withLock { state in
            state.timers.append(Timer(due: state.now + delaySeconds, job: job))
        }
        delays.withLock { $0.append(delaySeconds) }
        counts.withLock { $0.delayed += 1 }
    }

    public var now: Double { timers.withLock { $0.now } }

    /// Moves the test's clock on, and queues every delayed job now due (run them with `drain`).
    public func advance(by seconds: Double) {
        let due: [@Sendable () -> Void] = timers.withLock { state in
            state.now += seconds
            let ready = state.timers.filter { $0.due <= state.now }
            state.timers.removeAll { $0.due <= state.now }
            return ready.map(\.job)
        }
        jobs.withLock { $0 += due }
    }

    /// When the delayed jobs not yet due are due, on the test's clock.
    public var dueTimes: [Double] { timers.withLock { $0.timers.map(\.due) } }
    /// Delayed jobs not yet due.
    public var waiting: Int { timers.withLock { $0.timers.count } }
    /// Jobs queued and not yet run.
    public var pending: Int { jobs.withLock { $0.count } }
    /// Jobs ever queued at once.
    public var enqueued: Int { counts.withLock { $0.enqueued } }
    /// Jobs ever delayed.
    public var delayed: Int { counts.withLock { $0.delayed } }
    /// Every wake-up: jobs queued at once or delayed.
    public var wakeups: Int { counts.withLock { $0.enqueued + $0.delayed } }
    public var requestedDelays: [Double] { delays.withLock { $0 } }

    /// Runs every queued job, and any they queue, on the calling thread. Returns how many ran.
    @discardableResult
    public func drain() -> Int {
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
