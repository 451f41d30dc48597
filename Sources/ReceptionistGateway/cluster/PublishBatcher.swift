import ReceptionistLoop

/// Gathers the publishes one loop iteration makes to one Redis server and hands them on at the
/// iteration's end, before the connections flush, as bounded batches (`PublishBatch`) in the order
/// they were published: one script call each, all in one write. Its queue holds one iteration's
/// publishes at most, and the connection's `--redis-max-pending` bounds the calls owed.
///
/// Loop thread only.
final class PublishBatcher {
    typealias Completion = PublishAnswers.Completion

    private var full: [(PublishBatch, [Completion])] = []
    private var batch = PublishBatch()
    private var completions: [Completion] = []
    private var task: IterationTask?
    /// Sends one batch; its completions are answered in the batch's message order.
    private let send: (PublishBatch, [Completion]) -> Void

    init(loop: EventLoop, send: @escaping (PublishBatch, [Completion]) -> Void) {
        self.send = send
        task = IterationTask(loop: loop) { [unowned self] in self.sendAll() }
    }

    func add(_ message: PublishBatch.Message, _ completion: @escaping Completion) {
        if !batch.fits(message.data.count) {
            full.append((batch, completions))
            batch = PublishBatch()
            completions = []
        }
        batch.append(message)
        completions.append(completion)
        task?.schedule()
    }

    private func sendAll() {
        let ready = full
        full.removeAll()
        for (batch, completions) in ready { send(batch, completions) }
        guard !batch.isEmpty else { return }
        let last = (batch, completions)
        batch = PublishBatch()
        completions = []
        send(last.0, last.1)
    }
}
