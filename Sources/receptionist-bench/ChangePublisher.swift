import ReceptionistLoop
import ReceptionistModel

/// Publishes a store's change sets as a peer would have to carry them: each one a `changes` frame
/// of our own JSON (`changesPerFrame` models' `color` each set to a random `#rrggbb`, stamped with
/// its send time as `committedAt`), sent over a few WebSockets at a fixed rate for a fixed time. The peer publishes
/// each frame to its subscribers as it is and answers the publisher with one small frame.
///
/// The schedule is absolute (message n is due at n / rate seconds); a connection never has more
/// than `window` messages unanswered, so when the peer cannot keep up the achieved rate says so.
///
/// Loop thread only.
final class ChangePublisher {
    /// What each message is.
    enum Format: String, CaseIterable {
        /// A store's `changes` frame, for a peer to relay as it is (`bench/state.sh`).
        case changes
        /// A topic message, ~100 bytes carrying its send time as `sentAt`, in Receptionist's
        /// `publish` envelope (answered with `published`).
        case receptionistTopic = "receptionist-topic"
        /// The same message as it is, for a peer that publishes what it is sent.
        case rawTopic = "raw-topic"
        /// A dashboard's ~1 KiB message (`Publisher.dashboardBody`) in Receptionist's envelope.
        case receptionistDashboard = "receptionist-dashboard"
        /// The same dashboard message as it is.
        case rawDashboard = "raw-dashboard"
    }

    private let loop: EventLoop
    private let format: Format
    private let host: String
    private let port: Int
    private let path: String
    private let store: String
    private let models: Int
    /// Changes in each `changes` frame: one, as a single-change commit; more, as a coalesced frame.
    private let changesPerFrame: Int
    private var schedule: PublishSchedule
    private let connectionCount: Int

    private var pool: PublisherPool<ChangePublisherConnection>
    /// With it, no message goes more than `pace.ahead` in front of the average subscriber.
    private let pace: SubscriberPace?
    private var pending = 0
    private var failedConnections = 0
    private var timer: LoopTimer?
    private var accepted = 0
    private var errors = 0
    private var version: UInt64
    private var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    private(set) var firstError: String?
    private var completion: ((Publisher.Summary) -> Void)?

    init(loop: EventLoop, host: String, port: Int, path: String, store: String, models: Int, firstVersion: UInt64,
         rate: Double, duration: Double, connections: Int, window: Int, format: Format = .changes,
         changesPerFrame: Int = 1, pace: SubscriberPace? = nil) {
        self.changesPerFrame = max(1, changesPerFrame)
        self.pace = pace
        self.loop = loop
        self.format = format
        self.host = host
        self.port = port
        self.path = path
        self.store = store
        self.models = max(1, models)
        version = firstVersion
        schedule = PublishSchedule(rate: rate, duration: duration)
        connectionCount = max(1, connections)
        pool = PublisherPool(window: window)
    }

    /// The next change set's frame, byte for byte what the gateway sends for one `animate` commit.
    private func frame() -> String {
        switch format {
        case .changes: break
        case .rawTopic: return Publisher.body()
        case .receptionistTopic: return #"{"type":"publish","topic":"\#(store)","data":"# + Publisher.body() + "}"
        case .rawDashboard: return Publisher.dashboardBody()
        case .receptionistDashboard: return #"{"type":"publish","topic":"\#(store)","data":"# + Publisher.dashboardBody() + "}"
        }
        var changes: [String] = []
        for _ in 0..<changesPerFrame {
            seed ^= seed << 13
            seed ^= seed >> 7
            seed ^= seed << 17
            let model = Int(seed % UInt64(models))
            let color = AnimateJob.hexColor(UInt32(truncatingIfNeeded: seed >> 20) & 0xFF_FFFF)
            changes.append(#"{"model":"m\#(model)","path":"color","kind":"updated","value":"\#(color)"}"#)
        }
        defer { version += 1 }
        return #"{"type":"changes","store":"\#(store)","version":\#(version),"committedAt":\#(Clock.microsecondsSinceEpoch()),"#
            + #""changes":["# + changes.joined(separator: ",") + "]}"
    }

    /// Connects, publishes for `duration` seconds once every connection is open (or has failed),
    /// waits (at most 5 s) for the last answers, then closes its connections and calls `completion`.
    func start(completion: @escaping (Publisher.Summary) -> Void) {
        self.completion = completion
        // Bounded: a handshake that never answers does not hold the run.
        let timer = LoopTimer(loop: loop) { [unowned self] in
            if schedule.startedAt == nil { begin() } else { tick() }
        }
        self.timer = timer
        timer.start(delayMilliseconds: 10_000)
        pending = connectionCount
        for _ in 0..<connectionCount {
            TCPConnector.connect(loop: loop, host: host, port: port) { [unowned self] result in
                switch result {
                case .success(let connection):
                    pool.add(
                        ChangePublisherConnection(connection: connection, publisher: self, host: host, port: port, path: path))
                case .failure(let error):
                    note("\(error)")
                    failedConnections += 1
                    settle()
                }
            }
        }
    }

    private func settle() {
        pending -= 1
        if pending == 0 { begin() }
    }

    private func begin() {
        guard schedule.startedAt == nil else { return }
        guard pool.connections.contains(where: \.canSend) else {
            finish()
            return
        }
        schedule.start(at: Clock.monotonicSeconds())
        timer?.stop()
        timer?.start(delayMilliseconds: 0, repeatMilliseconds: 1)
    }

    private func tick() {
        switch schedule.step(at: Clock.monotonicSeconds(), outstanding: pool.outstanding) {
        case .send(let due):
            for _ in 0..<(pace?.allowance(due, sent: schedule.sent) ?? due) {
                guard let connection = pool.available() else { break }
                connection.send(frame())
                schedule.didSend()
            }
        case .settle: break
        case .finish: finish()
        }
    }

    private func finish() {
        guard let completion else { return }
        self.completion = nil
        timer?.close()
        timer = nil
        pool.closeAll()
        let seconds = schedule.seconds(now: Clock.monotonicSeconds())
        completion(
            Publisher.Summary(
                seconds: seconds, sent: schedule.sent, accepted: accepted, errors: errors, failedConnections: failedConnections))
    }

    private func note(_ error: String) {
        if firstError == nil { firstError = error }
    }

    // MARK: Reports from connections

    func connectionDidOpen(_ connection: ChangePublisherConnection) {
        settle()
    }

    func didAnswer(accepted: Bool) {
        if accepted { self.accepted += 1 } else { errors += 1 }
    }

    func didLose(_ connection: ChangePublisherConnection, unanswered: Int, wasReady: Bool, reason: String) {
        note(reason)
        errors += unanswered
        if !wasReady {
            failedConnections += 1
            settle()
        }
    }
}
