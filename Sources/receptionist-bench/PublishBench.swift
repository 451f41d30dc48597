import ArgumentParser
import Glibc
import ReceptionistLoop

/// Publishes to a topic at a fixed rate for a fixed time, for fan-out runs whose subscribers live
/// in other processes. Prints one JSON line with what the gateway acknowledged.
struct PublishBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "POST messages to a topic at a fixed rate over keep-alive connections.")

    @Option(help: "The gateway's address.")
    var host = "127.0.0.1"

    @Option(help: "The gateway's port.")
    var port = 8080

    @Option(help: "Topic to publish to.")
    var topic = "bench"

    @Option(help: "Path to POST to; default /api/topics/TOPIC/messages (a peer's publish endpoint otherwise).")
    var path = ""

    @Option(help: "Messages per second.")
    var rate = 100.0

    @Option(help: "Seconds to publish for.")
    var duration = 10.0

    @Option(help: "Keep-alive connections to spread the requests over.")
    var connections = 4

    @Option(help: "Most requests unanswered on one connection (1: request-response, as most backends publish; more: HTTP pipelining).")
    var window = 32

    @OptionGroup var pace: PaceOptions

    func validate() throws {
        guard rate > 0, duration > 0 else { throw ValidationError("--rate and --duration must be positive") }
    }

    func run() throws {
        let loop = try EventLoop()
        let publisher = Publisher(
            loop: loop, host: host, port: port, path: Publisher.path(path, topic: topic), rate: rate, duration: duration, connections: connections,
            window: window, pace: try pace.make())
        let result = PublishResult()
        publisher.start { summary in
            result.summary = summary
            // The mailbox is the last handle keeping the loop alive.
            loop.mailbox.shutDown()
        }
        loop.run()
        print(result.summary?.json ?? #"{"mode":"publish","error":"no result"}"#)
    }
}
