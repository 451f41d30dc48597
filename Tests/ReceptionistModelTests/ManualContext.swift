import ReceptionistModel
import ReceptionistSync

/// A receptionist's target that runs nothing until the test calls `drain()`, and then runs the
/// queued jobs on the calling thread. Its clock moves only when the test calls `advance(by:)`, so
/// a receptionist's cadence is tested without sleeping.
///
/// `enqueue` and `after` may be called from any thread (the committing one): the queue and the
/// timers are behind locks.
final class ManualContext: ExecutionContext {
    private struct Timer {
        let due: Double
        let job: @Sendable () -> Void
    }

    private let jobs = PThreadLock<[@Sendable () -> Void]>([])
    private let counts = PThreadLock((enqueued: 0, delayed: 0))
    private let timers = PThreadLock<(now: Double, timers: [Timer])>((1000, []))
    /// The delays `after` was asked for, in order.
    private let delays = PThreadLock<[Double]>([])
    /// Whether `enqueue` still accepts work.
    let accepting = PThreadLock(true)

    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        guard accepting.withLock({ $0 }) else { return false }
        jobs.withLock { $0.append(job) }
        counts.withLock { $0.enqueued += 1 }
        return true
    }

    /// Delayed jobs wait for the test's clock (`advance(by:)`), not the machine's.
    func after(_ delaySeconds: Double, _ job: @escaping @Sendable () -> Void) {
        timers.withLock { state in
            state.timers.append(Timer(due: state.now + delaySeconds, job: job))
        }
        delays.withLock { $0.append(delaySeconds) }
        counts.withLock { $0.delayed += 1 }
    }

    var now: Double { timers.withLock { $0.now } }

    /// Moves the test's clock on, and queues every delayed job now due (run them with `drain`).
    func advance(by seconds: Double) {
        let due: [@Sendable () -> Void] = timers.withLock { state in
            state.now += seconds
            let ready = state.timers.filter { $0.due <= state.now }
            state.timers.removeAll { $0.due <= state.now }
            return ready.map(\.job)
        }
        jobs.withLock { $0 += due }
    }

    /// When the delayed jobs not yet due are due, on the test's clock.
    var dueTimes: [Double] { timers.withLock { $0.timers.map(\.due) } }
    /// Delayed jobs not yet due.
    var waiting: Int { timers.withLock { $0.timers.count } }
    /// Jobs queued and not yet run.
    var pending: Int { jobs.withLock { $0.count } }
    /// Jobs ever queued at once.
    var enqueued: Int { counts.withLock { $0.enqueued } }
    /// Jobs ever delayed.
    var delayed: Int { counts.withLock { $0.delayed } }
    /// Every wake-up: jobs queued at once or delayed.
    var wakeups: Int { counts.withLock { $0.enqueued + $0.delayed } }
    var requestedDelays: [Double] { delays.withLock { $0 } }

    /// Runs every queued job, and any they queue, on the calling thread. Returns how many ran.
    @discardableResult
    func drain() -> Int {
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
