import ArgumentParser
import Glibc
import ReceptionistLoop
import ReceptionistModel

/// Opens many WebSocket subscribers to one topic or store of a running gateway and measures the
/// fan-out: deliveries, their bytes, and the latency from publish (the publisher's `sentAt` in each
/// body) or commit (a `changes` frame's oldest commit time) to receipt.
/// It speaks to Receptionist and, with `--dialect raw`, to peers such as nchan or uWebSockets.
///
/// Prints one JSON line when done, with the histogram's buckets so that a script can merge the
/// lines of several client processes (one process cannot hold more than its descriptor limit).
struct WebSocketBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws",
        abstract: "WebSocket fan-out: subscribers per process, deliveries per second and latency.")

    @Option(help: "The gateway's WebSocket endpoint, ws://HOST:PORT/PATH.")
    var url = "ws://127.0.0.1:8080/ws"

    @Option(help: "Subscriber connections this process opens.")
    var connections = 1000

    @Option(help: "Comma-separated local addresses to bind the connections to, round-robin (e.g. 127.0.0.2,127.0.0.3).")
    var sourceHosts = ""

    @Option(help: "Topic to subscribe to (and publish to).")
    var topic = "bench"

    @Option(help: "Subscribe to this store instead of the topic (Receptionist only): latency then runs from each change set's commit on a job thread.")
    var store = ""

    @Option(
        help: ArgumentHelp(
            "JSON members to add to a store subscription, such as '\"models\":[\"m1*\"],\"maxRate\":10'.",
            discussion: "Repeat it for several option sets: the connections take them round-robin, and the summary "
                + "reports each set apart, in the order given."))
    var subscribeOptions: [String] = []

    @Option(
        help: ArgumentHelp(
            "Resume the store subscription after this version, and check the answers.",
            discussion: "A version still in the history must be answered `subscribed` and then every change set from "
                + "since + 1 on; an older one with a snapshot marked reset. The summary's `resume` counts what came."))
    var since: Int64?

    @Option(help: "The store epoch that --since belongs to.")
    var epoch = ""

    @Option(
        help: ArgumentHelp(
            "Wall-clock microseconds since the Unix epoch that each subscriber's first-frame time counts from.",
            discussion: "Give every process of a reconnect storm the same start; by default, when this process starts. "
                + "A first frame later than --connect-timeout after it counts as late."))
    var originUs: Int64?

    @Option(help: "How to subscribe: receptionist (subprotocol and subscribe message) or raw (the URL subscribes).")
    var dialect = Dialect.receptionist

    @Flag(help: "Offer permessage-deflate, as browsers do, and inflate what the server sends compressed.")
    var deflate = false

    @Option(help: "With --deflate, one subscriber in this many inflates and times what it gets; the others count the compressed frames and their bytes unread.")
    var inflateEvery = 1

    @Flag(help: "Subscribe with \"presence\": true (Receptionist only), and count the presence frames.")
    var presence = false

    @Option(help: "Path the in-process publisher POSTs to; default /api/topics/TOPIC/messages.")
    var publishPath = ""

    @Option(help: "Messages per second to publish from this process once all are subscribed; 0 publishes nothing.")
    var publishRate = 0.0

    @Option(help: "Keep-alive connections the publisher uses.")
    var publishConnections = 4

    @Option(help: "A file to keep this process's count of delivered messages in, for a publisher's --pace-files.")
    var progressFile = ""

    @Option(help: "Seconds to run once all are subscribed (publishing, if asked); 0 runs until SIGINT or SIGTERM.")
    var duration = 10.0

    @Option(help: "Seconds to wait for the last deliveries after publishing stops.")
    var grace = 1.0

    @Option(help: "Seconds allowed for all connections to subscribe before the run goes on with those that did.")
    var connectTimeout = 60.0

    func validate() throws {
        guard connections >= 0 else { throw ValidationError("--connections must not be negative") }
        guard store.isEmpty || dialect == .receptionist else { throw ValidationError("--store needs --dialect receptionist") }
        guard !presence || dialect == .receptionist else { throw ValidationError("--presence needs --dialect receptionist") }
        guard subscribeOptions.isEmpty || !store.isEmpty else { throw ValidationError("--subscribe-options needs --store") }
        if let since {
            guard !store.isEmpty, since >= 0 else { throw ValidationError("--since needs --store and a version of 0 or more") }
            // Filtered subscriptions skip versions legitimately, so the frames could not be checked.
            guard subscribeOptions.isEmpty else { throw ValidationError("--since cannot be checked with --subscribe-options") }
        }
        guard epoch.isEmpty || since != nil else { throw ValidationError("--epoch needs --since") }
        guard epoch.allSatisfy({ $0 != "\"" && $0 != "\\" }) else { throw ValidationError("--epoch holds a quote or backslash") }
        _ = try Self.parse(url: url)
    }

    /// Host, port and path of a `ws://` URL with a literal address.
    static func parse(url: String) throws -> (host: String, port: Int, path: String) {
        guard url.hasPrefix("ws://") else { throw ValidationError("only ws:// URLs are supported") }
        let rest = url.dropFirst("ws://".count)
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        guard let colon = authority.lastIndex(of: ":"), let port = Int(authority[authority.index(after: colon)...])
        else { throw ValidationError("the URL needs a port: \(url)") }
        let host = authority[..<colon].trimmingCharacters(in: ["[", "]"])
        return (host, port, path.isEmpty ? "/" : String(path))
    }

    func run() throws {
        let (host, port, path) = try Self.parse(url: url)
        let loop = try EventLoop()
        let sources = sourceHosts.split(separator: ",").map { String($0) }
        let run = FanOutRun(
            loop: loop, host: host, port: port, path: path, sourceHosts: sources, connections: connections,
            subscribeTo: store.isEmpty ? .topic(topic) : .store(store), dialect: dialect, optionSets: subscribeOptions,
            since: since, epoch: epoch,
            firstFrames: FirstFrameStats(
                origin: originUs ?? Int64(Clock.microsecondsSinceEpoch()),
                boundMicroseconds: Int64(connectTimeout * 1_000_000)),
            deflate: deflate, presence: presence, inflateEvery: inflateEvery)
        if !progressFile.isEmpty { run.progress = try SharedCounter(path: progressFile, create: true) }
        let session = WebSocketBenchSession(loop: loop, run: run, options: self, host: host, port: port)
        try session.start()
        loop.run()
        print(session.summary)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Set<Character>) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
