import DequeModule

/// Which hook calls run and which wait: at most `maxInFlight` at once, then at most `maxQueued`
/// waiting, then refused. A pure state machine: the client acts on what it says.
///
/// Calls that admit a client (connect, subscribe, refresh: `admits`) go ahead of the others, three
/// for each one of those, and may take the whole queue; the others (a client's publish, write or
/// RPC, as many as it sends) leave a quarter of it to them. Else one user's RPCs over many
/// connections filled the queue, and every other user's connection was refused; and a storm of
/// connections still lets the others through, each within its time-out.
struct HookQueue<Call> {
    let maxInFlight: Int
    let maxQueued: Int
    private(set) var inFlight = 0
    /// The most calls ever under way at once (for tests and `/metrics`).
    private(set) var peakInFlight = 0
    private var waiting = Deque<Call>()
    private var admitting = Deque<Call>()
    /// Admitting calls started in a row while others waited.
    private var admittedInARow = 0

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

    var queued: Int { waiting.count + admitting.count }

    /// The waiting room the calls that do not admit a client may take.
    private var roomForOthers: Int { maxQueued - maxQueued / 4 }

    mutating func submit(_ call: Call, admits: Bool = false) -> Admission {
        if inFlight < maxInFlight {
            inFlight += 1
            peakInFlight = max(peakInFlight, inFlight)
            return .start(call)
        }
        guard queued < (admits ? maxQueued : roomForOthers) else { return .refused(call) }
        if admits { admitting.append(call) } else { waiting.append(call) }
        return .queued
    }

    /// A call ended; returns the next to start in its place, which counts as in flight: the
    /// longest waiting of those that admit a client, but for every fourth while others wait.
    mutating func finished() -> Call? {
        let next: Call?
        if !admitting.isEmpty, waiting.isEmpty || admittedInARow < 3 {
            admittedInARow += 1
            next = admitting.popFirst()
        } else {
            admittedInARow = 0
            next = waiting.popFirst()
        }
        guard let next else {
            inFlight -= 1
            return nil
        }
        return next
    }
}
