import ReceptionistLoop
import ReceptionistModel

/// The answers owed for the publishes of one script call (`PublishBatch`), by index: each given
/// at most once, by Redis and this node's mirror, or, once `--redis-timeout` has passed, by the
/// deadline, which says the outcome is unknown. One timer serves the whole call; it is closed once
/// every answer is given. A late answer is dropped.
///
/// Loop thread only.
final class PublishAnswers {
    private var waiters: [PublishBatch.Waiter?]
    private var owed: Int
    private var timer: LoopTimer?

    init(loop: EventLoop, seconds: Double, waiters: [PublishBatch.Waiter]) {
        // Mapped, not converted: `[Waiter]` as `[Waiter?]` casts each element at run time.
        self.waiters = waiters.map { $0 }
        owed = waiters.count
        let timer = LoopTimer(loop: loop) { [self] in
            answerAll(.failure(.outcomeUnknown("Redis did not answer in time; the message may or may not be published")))
        }
        timer.start(delayMilliseconds: UInt64(max(0, seconds) * 1000))
        self.timer = timer
    }

    func answer(_ index: Int, _ result: Result<UInt64, StoreError>) {
        guard let waiter = waiters[index] else { return }
        waiters[index] = nil
        owed -= 1
        if owed == 0 {
            // Closing the timer drops its closure, and with it the timer's hold on this object.
            timer?.close()
            timer = nil
        }
        waiter.answer(result)
    }

    /// Gives every answer still owed `result`.
    func answerAll(_ result: Result<UInt64, StoreError>) {
        for index in waiters.indices { answer(index, result) }
    }
}
