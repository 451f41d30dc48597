import ReceptionistLoop

/// Gathers the publishes one loop iteration makes to one Redis server and hands them on at the
/// iteration's end, before the connections flush, as bounded batches (`PublishBatch`) in the order
/// they were published: one script call each, all in one write. Its queue holds one iteration's
/// publishes at most, and the connection's `--redis-max-pending` bounds the calls owed.
///
/// Loop thread only.
final class PublishBatcher {
    typealias Completion = PublishAnswers.Completion

    /// This iteration's batches, in order: each full but the last.
    private var pending: [(batch: PublishBatch, completions: [Completion])] = []
    private var task: IterationTask?
    /// Sends one batch; its completions are answered in the batch's message order.
    private let send: (PublishBatch, [Completion]) -> Void

    init(loop: EventLoop, send: @escaping (PublishBatch, [Completion]) -> Void) {
        self.send = send
        task = IterationTask(loop: loop) { [unowned self] in self.sendAll() }
    }

    func add(_ message: PublishBatch.Message, _ completion: @escaping Completion) {
        // Asked in place: `pending.last` would copy the batch to ask it.
        if pending.isEmpty || !pending[pending.count - 1].batch.fits(message.data.count) { pending.append((PublishBatch(), [])) }
        pending[pending.count - 1].batch.append(message)
        pending[pending.count - 1].completions.append(completion)
        task?.schedule()
    }

    private func sendAll() {
        let ready = pending
        pending.removeAll()
        for (batch, completions) in ready { send(batch, completions) }
    }
}
