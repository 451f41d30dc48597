/// The clock of a fixed-rate publisher (`Publisher` over HTTP, `ChangePublisher` over WebSocket):
/// message n is due at n / rate seconds from the start, for `duration` seconds; then the run waits
/// (at most `settleSeconds`) for the last answers. The schedule is absolute, so a publisher that
/// fell behind catches up rather than drifting. Pure value: the caller's clock drives it.
struct PublishSchedule {
    let rate: Double
    let duration: Double
    /// The longest the run waits for answers once publishing has stopped.
    static let settleSeconds = 5.0

    private(set) var startedAt: Double?
    private(set) var stoppedAt: Double?
    private(set) var sent = 0

    init(rate: Double, duration: Double) {
        self.rate = rate
        self.duration = duration
    }

    enum Step: Equatable {
        /// Send up to this many messages now.
        case send(Int)
        /// Publishing is over: wait for the answers still owed.
        case settle
        /// Every answer came, or the wait is over.
        case finish
    }

    mutating func start(at now: Double) {
        startedAt = now
    }

    /// What to do at `now`, with `outstanding` answers owed.
    mutating func step(at now: Double, outstanding: Int) -> Step {
        guard let startedAt else { return .send(0) }
        if let stoppedAt {
            return outstanding == 0 || now - stoppedAt > Self.settleSeconds ? .finish : .settle
        }
        let elapsed = now - startedAt
        let due = Int(min(elapsed, duration) * rate)
        if elapsed >= duration { stoppedAt = now }
        return .send(max(0, due - sent))
    }

    /// Counts a message sent.
    mutating func didSend() {
        sent += 1
    }

    /// Seconds spent publishing, for the rate the run achieved.
    func seconds(now: Double) -> Double {
        guard let startedAt else { return 0 }
        return min(duration, max(0, (stoppedAt ?? now) - startedAt))
    }
}
