import ReceptionistLoop

/// Gathers the publishes made to one Redis server into batches (`PublishBatch`), in the order they
/// were published, one script call each. A full batch leaves at once, written to Redis then and
/// there (`flushNow`), so Redis numbers it while the loop reads the iteration's other requests; the
/// last one leaves at the iteration's end, before the connections flush. Its queue holds one
/// batch at most, and the connection's `--redis-max-pending` bounds the calls owed.
///
/// Loop thread only.
final class PublishBatcher {
    typealias Completion = PublishAnswers.Completion

    /// The batch being gathered, and its completions in its message order.
    private var batch = PublishBatch()
    private var completions: [Completion] = []
    private var task: IterationTask?
    /// Sends one batch; its completions are answered in the batch's message order.
    private let send: (PublishBatch, [Completion]) -> Void
    /// Writes what has been sent now, not at the iteration's end.
    private let flushNow: () -> Void

    init(loop: EventLoop, flushNow: @escaping () -> Void, send: @escaping (PublishBatch, [Completion]) -> Void) {
        self.send = send
        self.flushNow = flushNow
        task = IterationTask(loop: loop) { [unowned self] in self.sendBatch() }
    }

    func add(_ message: PublishBatch.Message, _ completion: @escaping Completion) {
        if !batch.fits(message.data.count) { sendNow() }
        batch.append(message)
        completions.append(completion)
        if batch.isFull { sendNow() } else { task?.schedule() }
    }

    private func sendNow() {
        sendBatch()
        flushNow()
    }

    private func sendBatch() {
        guard !batch.messages.isEmpty else { return }
        let (ready, answers) = (batch, completions)
        batch = PublishBatch()
        completions = []
        send(ready, answers)
    }
}
