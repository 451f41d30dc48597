import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync

/// Publishes to one topic at a fixed rate over a few keep-alive connections for a fixed time, with
/// ~100-byte JSON bodies that carry their send time (`sentAt`, wall-clock microseconds), and
/// counts what the server acknowledged with a 2xx.
///
/// The schedule is absolute (message n is due at n / rate seconds), so a publisher that fell
/// behind catches up rather than drifting; it never has more than `window` requests unanswered on
/// one connection, so when the gateway cannot keep up the achieved rate says so.
///
/// Loop thread only.
final class Publisher {
    struct Summary {
        let seconds: Double
        let sent: Int
        let accepted: Int
        let errors: Int
        let failedConnections: Int

        var json: String {
            #"{"mode":"publish","seconds":\#(Format.fixed(seconds, 3)),"sent":\#(sent),"accepted":\#(accepted),"#
                + #""errors":\#(errors),"failed_connections":\#(failedConnections),"#
                + #""published_per_s":\#(Format.fixed(Double(accepted) / max(seconds, 0.001), 1))}"#
        }
    }

    private let loop: EventLoop
    private let host: String
    private let port: Int
    private var schedule: PublishSchedule
    private let connectionCount: Int
    private let template: PublishRequest

    private var pool: PublisherPool<PublisherConnection>
    /// With it, no message goes more than `pace.ahead` in front of the average subscriber.
    private let pace: SubscriberPace?
    private var pendingConnects = 0
    private var failedConnections = 0
    private var timer: LoopTimer?
    private var accepted = 0
    private var errors = 0
    private var completion: ((Summary) -> Void)?

    init(loop: EventLoop, host: String, port: Int, path: String, rate: Double, duration: Double,
         connections: Int, window: Int = 32, pace: SubscriberPace? = nil) {
        self.pace = pace
        self.loop = loop
        self.host = host
        self.port = port
        schedule = PublishSchedule(rate: rate, duration: duration)
        connectionCount = max(1, connections)
        pool = PublisherPool(window: window)
        template = PublishRequest(path: path, host: host, port: port)
    }

    /// `path`, or Receptionist's publish path for `topic` when it is empty.
    static func path(_ path: String, topic: String) -> String {
        path.isEmpty ? "/api/topics/\(topic)/messages" : path
    }

    /// One message, stamped now. Padding brings it to about 100 bytes, a typical notification.
    static func body() -> String {
        body(sentAt: Clock.microsecondsSinceEpoch())
    }

    /// `body()`'s message, stamped `sentAt`: what `PublishRequest` writes too.
    static func body(sentAt: UInt64) -> String {
        #"{"sentAt":\#(sentAt),"text":""# + String(repeating: "x", count: 64) + #""}"#
    }

    /// What a dashboard is sent: one host's sixteen metrics, each with its name, value, unit and
    /// state, about 1 KiB, stamped now. The values change from message to message and the names
    /// repeat, as in a real feed, so it compresses as such a feed does (not as padding would).
    static func dashboardBody() -> String {
        var text = #"{"sentAt":\#(Clock.microsecondsSinceEpoch()),"host":"web-\#(UInt8.random(in: 0...63))","#
            + #""region":"eu-west-1","metrics":["#
        for (index, (name, unit)) in dashboardMetrics.enumerated() {
            let value = Double(UInt32.random(in: 0...999_999)) / 100
            let state = value > 9000 ? "critical" : value > 7000 ? "warning" : "ok"
            text += (index == 0 ? "" : ",") + #"{"name":"\#(name)","value":\#(value),"unit":"\#(unit)","state":"\#(state)"}"#
        }
        return text + "]}"
    }

    private static let dashboardMetrics = [
        ("cpu.user", "percent"), ("cpu.system", "percent"), ("cpu.iowait", "percent"), ("load.1m", "tasks"),
        ("memory.used", "megabytes"), ("memory.cached", "megabytes"), ("disk.read", "kilobytes/s"),
        ("disk.write", "kilobytes/s"), ("net.rx", "kilobytes/s"), ("net.tx", "kilobytes/s"),
        ("http.requests", "requests/s"), ("http.errors", "requests/s"), ("http.latency.p50", "milliseconds"),
        ("http.latency.p99", "milliseconds"), ("db.connections", "connections"), ("queue.depth", "jobs"),
    ]

    /// One request, stamped now.
    private func request() -> SharedBytes {
        template.bytes(sentAt: Clock.microsecondsSinceEpoch())
    }

    /// Connects, publishes for `duration` seconds, waits (at most 5 s) for the last answers, then
    /// closes its connections and calls `completion`.
    func start(completion: @escaping (Summary) -> Void) {
        self.completion = completion
        pendingConnects = connectionCount
        for _ in 0..<connectionCount {
            TCPConnector.connect(loop: loop, host: host, port: port) { [unowned self] result in
                pendingConnects -= 1
                switch result {
                case .success(let connection):
                    pool.add(PublisherConnection(connection: connection, publisher: self))
                case .failure:
                    failedConnections += 1
                }
                if pendingConnects == 0 { begin() }
            }
        }
    }

    private func begin() {
        guard !pool.connections.isEmpty else {
            finish()
            return
        }
        schedule.start(at: Clock.monotonicSeconds())
        let timer = LoopTimer(loop: loop) { [unowned self] in tick() }
        self.timer = timer
        timer.start(delayMilliseconds: 0, repeatMilliseconds: 1)
    }

    private func tick() {
        switch schedule.step(at: Clock.monotonicSeconds(), outstanding: pool.outstanding) {
        case .send(let due):
            for _ in 0..<(pace?.allowance(due, sent: schedule.sent) ?? due) {
                guard let connection = pool.available() else { break }
                connection.send(request())
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
        completion(Summary(seconds: seconds, sent: schedule.sent, accepted: accepted, errors: errors, failedConnections: failedConnections))
    }

    // MARK: Reports from connections

    func didAnswer(accepted: Bool) {
        if accepted { self.accepted += 1 } else { errors += 1 }
        // A request-response backend sends its next message as soon as the answer is in, not on
        // the next millisecond tick (which would cap it at connections × window a millisecond).
        if timer != nil { tick() }
    }

    func didLose(_ connection: PublisherConnection, unanswered: Int) {
        errors += unanswered
    }
}
