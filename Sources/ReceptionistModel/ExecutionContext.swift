/// Somewhere work can be sent to run: the loop's mailbox, or a test's queue.
public protocol ExecutionContext: Sendable {
    /// Queues `job` to run on the context. Returns false if the context accepts no more work.
    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool

    /// Calls `tick` on the context every `intervalSeconds` until the returned value is cancelled.
    func every(_ intervalSeconds: Double, _ tick: @escaping @Sendable () -> Void) -> any Cancellable
}

/// Something that can be stopped. Any thread.
public protocol Cancellable: Sendable {
    func cancel()
}
