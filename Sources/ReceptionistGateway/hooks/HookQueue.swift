import DequeModule

/// Which hook calls run and which wait: at most `maxInFlight` at once, then at most `maxQueued`
/// waiting in arrival order, then refused. A pure state machine: the client acts on what it says.
struct HookQueue<Call> {
    let maxInFlight: Int
    let maxQueued: Int
    private(set) var inFlight = 0
    /// The most calls ever under way at once (for tests and `/metrics`).
    private(set) var peakInFlight = 0
    private var waiting = Deque<Call>()

    init(maxInFlight: Int, maxQueued: Int) {
        self.maxInFlight = max(1, maxInFlight)
        self.maxQueued = max(0, maxQueued)
    }

    enum Admission {
        /// Start it now; it counts as in flight until `finished`.
        case start(Call)
        case queued
        /// Both bounds are reached: answer the client `unavailable`.
        case refused(Call)
    }

    var queued: Int { waiting.count }

    mutating func submit(_ call: Call) -> Admission {
        if inFlight < maxInFlight {
            inFlight += 1
            peakInFlight = max(peakInFlight, inFlight)
            return .start(call)
        }
        guard waiting.count < maxQueued else { return .refused(call) }
        waiting.append(call)
        return .queued
    }

    /// A call ended; returns the next to start in its place, which counts as in flight.
    mutating func finished() -> Call? {
        guard let next = waiting.popFirst() else {
            inFlight -= 1
            return nil
        }
        return next
    }
}
