import ReceptionistLoop
import ReceptionistWire

/// Many `FanOutClient`s on one loop: opens them a bounded number at a time, spread round-robin over
/// the source addresses and the subscription option sets, and keeps the counts, bytes and latency
/// histograms they report, one `DeliveryStats` per option set.
///
/// Loop thread only.
final class FanOutRun {
    let loop: EventLoop
    let host: String
    let port: Int
    let path: String
    let sourceHosts: [String]
    let target: Int
    /// The messages that subscribe, one per option set, given to the connections round-robin;
    /// empty where the URL itself subscribes.
    let subscribeMessages: [String]
    /// The subprotocol offered in the handshake, if any.
    let subprotocol: String?
    /// A store's snapshot and a coalesced frame of a thousand models are tens of KiB.
    let maxMessageBytes = 4 * 1024 * 1024
    /// Set when subscribers offer permessage-deflate: one inflating stream serves them all, since
    /// a server that compresses once for every subscriber keeps no context between messages
    /// (a subscriber whose server would keep one fails rather than misread).
    let inflater: ZlibStream?
    /// With `inflater`, one subscriber in this many inflates and times what it gets; the others
    /// count the compressed frames and their bytes (`FrameReader.Compression.skip`).
    let inflateEvery: Int
    /// Every byte read from every subscriber's socket: what the wire carried, compressed or not.
    var wireBytes = 0
    /// Presence frames the subscribers were sent, and their bytes (payload and header).
    var presenceFrames = 0
    var presenceBytes = 0
    /// Connections between connect and subscribed at any time: enough to keep the server's accept
    /// queue busy, few enough to stay inside its listen backlog.
    let maxOpening: Int
    /// The store version every subscriber resumes after (`since`), whose answers it checks.
    let since: Int64?

    /// Where the deliveries counted in `delivered` are also written for a pacing publisher to read.
    var progress: SharedCounter?

    /// Called once every connection has subscribed or failed.
    var onSettled: (() -> Void)?

    private(set) var started = 0
    private(set) var connected = 0
    private(set) var subscribed = 0
    private(set) var failed = 0
    /// Subscribed connections that were lost afterwards.
    private(set) var dropped = 0
    /// Per option set (one when there are none).
    private(set) var groups: [DeliveryStats]
    private(set) var firstDelivery: Int64 = 0
    private(set) var lastDelivery: Int64 = 0
    private(set) var firstError: String?
    private(set) var firstFrames: FirstFrameStats
    /// Kept when subscribers resume (`since`).
    var resume = ResumeStats()
    private var opening = 0
    private var clients: [FanOutClient] = []
    private var stopped = false
    private var isOpening = false

    init(loop: EventLoop, host: String, port: Int, path: String, sourceHosts: [String], connections: Int,
         subscribeTo target: StreamTarget, dialect: Dialect, optionSets: [String] = [], maxOpening: Int = 256,
         since: Int64? = nil, epoch: String = "", firstFrames: FirstFrameStats, deflate: Bool = false,
         presence: Bool = false, inflateEvery: Int = 1) {
        self.inflateEvery = max(1, inflateEvery)
        inflater = deflate ? ZlibStream(.inflate) : nil
        self.loop = loop
        self.host = host
        self.port = port
        self.path = path
        self.sourceHosts = sourceHosts
        self.target = connections
        self.maxOpening = maxOpening
        self.since = since
        self.firstFrames = firstFrames
        switch dialect {
        case .receptionist:
            let head: String
            switch target {
            case .topic(let name): head = #"{"type":"subscribe","topic":""# + name + #"""#
            case .store(let name): head = #"{"type":"subscribe","store":""# + name + #"""#
            }
            var resume = presence ? #","presence":true"# : ""
            if let since { resume += #","since":\#(since)"# + (epoch.isEmpty ? "" : #","epoch":"\#(epoch)""#) }
            subscribeMessages = (optionSets.isEmpty ? [""] : optionSets).map {
                $0.isEmpty ? head + resume + "}" : head + resume + "," + $0 + "}"
            }
            subprotocol = "receptionist.v1"
        case .raw:
            subscribeMessages = []
            subprotocol = nil
        }
        groups = Array(repeating: DeliveryStats(), count: max(1, optionSets.count))
        clients.reserveCapacity(connections)
    }

    var isSettled: Bool { subscribed + failed >= target }

    func start() {
        openMore()
        checkSettled()
    }

    /// Closes every connection; the loop can then run out of handles.
    func stop() {
        stopped = true
        for client in clients { client.close() }
        clients = []
    }

    private func openMore() {
        // A connect that fails at once reports back into here; the outer loop carries on instead,
        // so that a run of immediate failures cannot nest one call per connection.
        guard !isOpening else { return }
        isOpening = true
        defer { isOpening = false }
        while !stopped && started < target && opening < maxOpening {
            let source = sourceHosts.isEmpty ? nil : sourceHosts[started % sourceHosts.count]
            let group = started % groups.count
            let inflates = started % inflateEvery == 0
            started += 1
            opening += 1
            TCPConnector.connect(loop: loop, host: host, port: port, sourceHost: source) { [unowned self] result in
                switch result {
                case .success(let connection):
                    guard !stopped else {
                        connection.close()
                        return
                    }
                    clients.append(FanOutClient(
                        connection: connection, run: self, group: group, inflates: inflates))
                case .failure(let error):
                    clientDidFail("\(error)", wasSubscribed: false)
                }
            }
        }
    }

    private func checkSettled() {
        guard isSettled, let onSettled else { return }
        self.onSettled = nil
        onSettled()
    }

    // MARK: Reports from clients

    func clientDidConnect() {
        connected += 1
    }

    /// A subscriber got its first frame (`subscribed` or `snapshot`) at `now`, having sent its
    /// subscribe at `sentAt` (nil where the URL subscribes).
    func clientDidSubscribe(group: Int, sentAt: Int64?, at now: Int64) {
        subscribed += 1
        if let sentAt { firstFrames.record(subscribeSentAt: sentAt, at: now) }
        groups[group].subscribed += 1
        opening -= 1
        openMore()
        checkSettled()
    }

    func clientDidFail(_ reason: String, wasSubscribed: Bool) {
        if firstError == nil { firstError = reason }
        if wasSubscribed {
            dropped += 1
            return
        }
        failed += 1
        opening -= 1
        openMore()
        checkSettled()
    }

    /// One delivery to a subscriber of `group`: `bytes` on the wire, stamped with the commit or
    /// publish time it stands for (nil for a frame that carries none).
    func record(group: Int, stamp: Int64?, bytes: Int, at now: Int64) {
        if firstDelivery == 0 { firstDelivery = now }
        lastDelivery = now
        groups[group].bytes += bytes
        if let stamp {
            progress?.value += 1
            groups[group].timed += 1
            groups[group].histogram.record(now - stamp)
        } else {
            groups[group].untimed += 1
        }
    }

    /// A compressed message a subscriber counted without inflating it (`--inflate-every`).
    func recordUninflated(group: Int, bytes: Int, at now: Int64) {
        if firstDelivery == 0 { firstDelivery = now }
        lastDelivery = now
        groups[group].bytes += bytes
        groups[group].uninflated += 1
        progress?.value += 1
    }

    /// Deliveries over all groups: the timed ones, and the compressed ones counted uninflated.
    var delivered: Int { groups.reduce(0) { $0 + $1.timed + $1.uninflated } }

    /// The staleness of every timed delivery, all groups together.
    var histogram: LatencyHistogram {
        groups.reduce(into: LatencyHistogram()) { $0.add($1.histogram) }
    }
}
