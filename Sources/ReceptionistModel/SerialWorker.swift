import ReceptionistSync

/// One thread that runs queued closures in order: replicas apply the shared log's change sets
/// here, in log order, off both the loop (an observer may block on backpressure from the loop)
/// and the job pool (a committing job waits for its own change set to be applied).
///
/// Any thread may `enqueue`; the queue is unbounded, fed by the loop at the rate Redis answers.
public final class SerialWorker: Sendable {
    private struct Queue {
        var work: [@Sendable () -> Void] = []
        var stopping = false
    }

    private let queue = ConditionLock(Queue())

    public init() {
        _ = WorkerThread.start { [queue] in
            while true {
                let batch: [@Sendable () -> Void]? = queue.wait(until: { !$0.work.isEmpty || $0.stopping }) { queue in
                    if queue.work.isEmpty { return nil }
                    defer { queue.work.removeAll(keepingCapacity: true) }
                    return queue.work
                }
                guard let batch else { return }
                for work in batch { work() }
            }
        }
    }

    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        queue.withLock { $0.work.append(work) }
        queue.broadcast()
    }

    /// Lets the thread finish what is queued and end. Does not wait for it: the caller may be the
    /// loop, which the thread may be waiting on (a receptionist's backpressure). Idempotent.
    public func stop() {
        queue.withLock { $0.stopping = true }
        queue.broadcast()
    }
}
