import ReceptionistSync

/// One thread that runs queued closures in order: replicas apply the shared log's change sets
/// here, in log order, off both the loop (an observer may block on backpressure from the loop)
/// and the job pool (a committing job waits for its own change set to be applied).
///
/// Any thread may `enqueue`. The queue holds at most `maxQueued` closures; past it `enqueue`
/// refuses, and the caller decides (a replica re-reads its store whole once there is room).
public final class SerialWorker: Sendable {
    private struct Queue {
        var work: [@Sendable () -> Void] = []
        var stopping = false
    }

    private let queue = ConditionLock(Queue())
    public let maxQueued: Int

    public init(maxQueued: Int = 10_000) {
        self.maxQueued = max(1, maxQueued)
        // Never joined (`stop` must not wait, see there): the thread ends by itself once stopped.
        WorkerThread.start { [queue] in
            while true {
                let batch: [@Sendable () -> Void]? = queue.wait(until: { !$0.work.isEmpty || $0.stopping }) { queue in
                    if queue.work.isEmpty { return nil }
                    defer { queue.work.removeAll(keepingCapacity: true) }
                    return queue.work
                }
                guard let batch else { return }
                for work in batch { work() }
            }
        }.detach()
    }

    /// Queues `work`; false (and `work` dropped) when `maxQueued` closures are waiting already.
    @discardableResult
    public func enqueue(_ work: @escaping @Sendable () -> Void) -> Bool {
        let accepted = queue.withLock { queue in
            guard queue.work.count < maxQueued else { return false }
            queue.work.append(work)
            return true
        }
        if accepted { queue.broadcast() }
        return accepted
    }

    /// Closures waiting to run (not counting a batch being run).
    public var queuedCount: Int { queue.withLock { $0.work.count } }

    /// Lets the thread finish what is queued and end. Does not wait for it: the caller may be the
    /// loop, which the thread may be waiting on (a receptionist's backpressure). Idempotent.
    public func stop() {
        queue.withLock { $0.stopping = true }
        queue.broadcast()
    }
}
