/// Somewhere work can be sent to run: the loop's mailbox, or a test's queue. It keeps the time
/// its timers run by, so a test can run a receptionist's cadence on a clock of its own.
public protocol ExecutionContext: Sendable {
    /// Queues `job` to run on the context. Returns false if the context accepts no more work.
    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool

    /// Runs `job` on the context once, `delaySeconds` from now: from the call, however long the
    /// context takes to get to it (never sooner by the context's own timers, though possibly a
    /// little sooner by `now`). It cannot be cancelled: a job that is no longer wanted checks for
    /// that itself. After the context shuts down nothing runs. Any thread.
    func after(_ delaySeconds: Double, _ job: @escaping @Sendable () -> Void)

    /// Monotonic seconds, the clock `after` counts by. Any thread.
    var now: Double { get }
}

extension ExecutionContext {
    public var now: Double { Clock.monotonicSeconds() }
}
