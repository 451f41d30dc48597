import ReceptionistJSON
import ReceptionistSync

/// Recolors the models of a store at `rate` change sets per second, spread over the job threads.
///
/// The job owns no thread: the runner's ticker asks it how much work is due and hands the slices
/// to the pool, so HTTP mutations keep running beside it on the same threads.
///
/// Any thread.
public final class AnimateJob: Sendable {
    public let id: String
    public let store: ModelStore

    private struct State {
        var rate: Double
        var state: JobState = .running
        var baseline = Clock.monotonicSeconds()
        var issued = 0.0
        var committed = 0
        var slicesInFlight = 0
        var modelIDs: [String] = []
        var modelIDsVersion: UInt64 = .max
        var seed: UInt64
    }

    private let state: PThreadLock<State>

    init(id: String, store: ModelStore, rate: Double, seed: UInt64) {
        self.id = id
        self.store = store
        state = PThreadLock(State(rate: rate, seed: seed | 1))
    }

    public var info: JobInfo {
        state.withLock {
            JobInfo(id: id, kind: "animate", store: store.name, rate: $0.rate, state: $0.state, changes: $0.committed)
        }
    }

    public var isRunning: Bool { state.withLock { $0.state == .running } }

    public func setRate(_ rate: Double) {
        state.withLock { state in
            state.rate = rate
            state.baseline = Clock.monotonicSeconds()
            state.issued = 0
        }
    }

    /// Stops at a change-set boundary: slices check before every commit.
    public func stop() {
        state.withLock { state in
            if state.state == .running { state.state = .stopped }
        }
    }

    /// The most change sets one slice commits: a few milliseconds of a job thread's time.
    static let maxSliceChangeSets = 256

    /// The slices due now, each a number of change sets, at most `maxSlices` of them in flight.
    func dueSlices(now: Double, threads: Int) -> [Int] {
        state.withLock { state in
            guard state.state == .running else { return [] }
            // A job whose store is gone fails at once, whether or not it has a commit to make
            // (an empty store, or a slow rate, would never try one).
            if store.isDeleted {
                state.state = .failed(StoreError.noSuchStore(store.name).description)
                return []
            }
            let due = Int((now - state.baseline) * state.rate - state.issued)
            let room = max(0, threads * 2 - state.slicesInFlight)
            guard due >= 1, room > 0 else {
                // Behind by more than a second's work: forget the backlog rather than queue it.
                if due > Int(max(state.rate, 1)) && room == 0 { state.issued += Double(due) }
                return []
            }
            let count = min(room, threads, due)
            // A slice runs to its end on a job thread, and store requests queue behind it: a
            // slice is kept to a few milliseconds of work however fast the job is asked to go.
            let take = min(due, count * Self.maxSliceChangeSets)
            state.issued += Double(take)
            // Behind by more than a second's work: forget the backlog rather than queue it.
            if due - take > Int(max(state.rate, 1)) { state.issued += Double(due - take) }
            let each = take / count
            var slices = [Int](repeating: each, count: count)
            slices[0] += take - each * count
            state.slicesInFlight += count
            return slices
        }
    }

    /// Commits `count` recolors from the calling job thread. A replica's commits are handed to
    /// the shared log without waiting for it; the slice stays in flight (and counts against the
    /// slices allowed) until every one of them is answered.
    func run(slice count: Int) {
        guard count > 0 else { return state.withLock { $0.slicesInFlight -= 1 } }
        let owed = PThreadLock((answers: count, halted: false))
        let answered: @Sendable (_ halt: Bool) -> Void = { [state] halt in
            let last = owed.withLock { owed -> Bool in
                owed.answers -= 1
                if halt { owed.halted = true }
                return owed.answers == 0
            }
            if last { state.withLock { $0.slicesInFlight -= 1 } }
        }
        var issued = 0
        while issued < count, !owed.withLock({ $0.halted }), let (model, color) = nextRecolor() {
            issued += 1
            store.commit([.set(model: model, keyPath: "color", value: .string(color))]) { [state] result in
                switch result {
                case .success:
                    state.withLock { $0.committed += 1 }
                    answered(false)
                case .failure(.noSuchModel):
                    // Deleted under us; the next pick refreshes the list.
                    state.withLock { $0.modelIDsVersion = .max }
                    answered(false)
                case .failure(.unavailable), .failure(.outcomeUnknown):
                    // The cluster's log is down or busy: skip the rest of this slice and keep
                    // running; it reconnects.
                    answered(true)
                case .failure(let error):
                    state.withLock { $0.state = .failed(error.description) }
                    answered(true)
                }
            }
        }
        for _ in issued..<count { answered(false) }
    }

    private func nextRecolor() -> (String, String)? {
        let version = store.version
        return state.withLock { state -> (String, String)? in
            guard state.state == .running else { return nil }
            if state.modelIDsVersion == .max || state.modelIDs.isEmpty && state.modelIDsVersion != version {
                state.modelIDs = store.modelIDs.sorted()
                state.modelIDsVersion = version
            }
            guard !state.modelIDs.isEmpty else { return nil }
            // xorshift64: cheap, good enough for picking tiles and colors.
            state.seed ^= state.seed << 13
            state.seed ^= state.seed >> 7
            state.seed ^= state.seed << 17
            let model = state.modelIDs[Int(state.seed % UInt64(state.modelIDs.count))]
            return (model, Self.hexColor(UInt32(truncatingIfNeeded: state.seed >> 20) & 0xFF_FFFF))
        }
    }

    /// `#rrggbb` for the low 24 bits of `rgb`.
    public static func hexColor(_ rgb: UInt32) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "#")]
        for shift in stride(from: 20, through: 0, by: -4) {
            out.append(digits[Int((rgb >> UInt32(shift)) & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
