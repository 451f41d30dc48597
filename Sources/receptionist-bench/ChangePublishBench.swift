import ArgumentParser
import ReceptionistLoop

/// Publishes a store's change sets over WebSocket to a peer that fans them out (`bench/state.sh`
/// gives the uWebSockets peer this workload), at a fixed rate for a fixed time. Prints one JSON
/// line with what the peer acknowledged.
struct ChangePublishBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish-changes",
        abstract: "Send one-change `changes` frames over WebSocket at a fixed rate, each acknowledged by the peer.")

    @Option(help: "The peer's publishing WebSocket, ws://HOST:PORT/PATH.")
    var url = "ws://127.0.0.1:8080/publish"

    @Option(help: "Store name the frames carry.")
    var store = "bench"

    @Option(help: "Models m0 … m(N-1) to pick from, uniformly, as the gateway's animate job does.")
    var models = 1000

    @Option(help: "Version of the first frame; one more for each after it.")
    var firstVersion: UInt64 = 2

    @Option(help: "Frames per second.")
    var rate = 2000.0

    @Option(help: "Seconds to publish for.")
    var duration = 10.0

    @Option(help: "WebSocket connections to spread the frames over, round-robin.")
    var connections = 1

    @Option(help: "Frames a connection may have unacknowledged; past that it waits.")
    var window = 32

    @Option(help: "What each message is: changes (a store's frame, for a relaying peer), receptionist-topic (a ~100-byte message in Receptionist's publish envelope, to the topic named by --store), raw-topic (the same message as it is), receptionist-dashboard or raw-dashboard (a dashboard's ~1 KiB message, the same two ways).")
    var format = "changes"

    @Option(help: "Changes in each `changes` frame (1: a single-change commit's frame; more: the size of a coalesced one).")
    var changesPerFrame = 1

    @OptionGroup var pace: PaceOptions

    func validate() throws {
        guard rate > 0, duration > 0 else { throw ValidationError("--rate and --duration must be positive") }
        guard models > 0, connections > 0, window > 0, changesPerFrame > 0 else {
            throw ValidationError("--models, --connections, --window and --changes-per-frame must be positive")
        }
        _ = try WebSocketBench.parse(url: url)
        guard ChangePublisher.Format(rawValue: format) != nil else {
            throw ValidationError("--format is one of \(ChangePublisher.Format.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    func run() throws {
        let (host, port, path) = try WebSocketBench.parse(url: url)
        let loop = try EventLoop()
        let publisher = ChangePublisher(
            loop: loop, host: host, port: port, path: path, store: store, models: models, firstVersion: firstVersion,
            rate: rate, duration: duration, connections: connections, window: window,
            format: ChangePublisher.Format(rawValue: format) ?? .changes, changesPerFrame: changesPerFrame,
            pace: try pace.make())
        let result = PublishResult()
        publisher.start { summary in
            result.summary = summary
            loop.mailbox.shutDown()
        }
        loop.run()
        var line = result.summary?.json ?? #"{"mode":"publish","error":"no result"}"#
        if let error = publisher.firstError {
            line.removeLast()
            line += #","first_error":"\#(String(error.map { $0 == "\"" || $0 == "\\" ? "'" : $0 }))"}"#
        }
        print(line)
    }
}
