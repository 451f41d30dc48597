import ReceptionistLoop

/// The publishes made to one Redis server, gathered into script calls (`PublishBatch`).
typealias PublishBatcher = ScriptBatcher<PublishBatch>
/// The commits made to stores on one Redis server, gathered into script calls (`CommitBatch`).
typealias CommitBatcher = ScriptBatcher<CommitBatch>

/// Gathers the writes made to one Redis server into batches, in the order they were made, one
/// script call each. A full batch leaves at once, written to Redis then and there (`flushNow`),
/// so Redis runs it while the loop reads the iteration's other requests; the last one leaves at
/// the iteration's end, before the connections flush. Its queue holds one batch at most, and the
/// connection's `--redis-max-pending` bounds the calls owed.
///
/// Loop thread only.
final class ScriptBatcher<Batch: ScriptBatch> {
    /// The batch being gathered, and what waits for its items' answers, in its items' order.
    private var batch = Batch()
    private var waiters: [Batch.Waiter] = []
    private var task: IterationTask?
    /// Sends one batch; its waiters are answered in the batch's order.
    private let send: (Batch, [Batch.Waiter]) -> Void
    /// Writes what has been sent now, not at the iteration's end.
    private let flushNow: () -> Void

    init(loop: EventLoop, flushNow: @escaping () -> Void, send: @escaping (Batch, [Batch.Waiter]) -> Void) {
        self.send = send
        self.flushNow = flushNow
        task = IterationTask(loop: loop) { [unowned self] in self.sendBatch() }
    }

    func add(_ item: Batch.Item, _ waiter: Batch.Waiter) {
        if !batch.fits(item) { sendNow() }
        batch.append(item)
        if waiters.isEmpty { waiters.reserveCapacity(Batch.capacity) }
        waiters.append(waiter)
        if batch.isFull { sendNow() } else { task?.schedule() }
    }

    /// Sends the batch being gathered now, so that a command sent next on the connection runs
    /// after it (a store's deletion after the commits made to it before).
    func sendPending() {
        sendBatch()
    }

    private func sendNow() {
        sendBatch()
        flushNow()
    }

    private func sendBatch() {
        guard !batch.isEmpty else { return }
        let (ready, waiting) = (batch, waiters)
        batch = Batch()
        waiters = []
        send(ready, waiting)
    }
}
