import Dispatch
import Foundation
import Glibc
import Logging
import ReceptionistGateway
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
import ReceptionistTestSupport
import Synchronization
import Testing

/// Invariant 17 through the whole gateway: a real loop, real job threads and a real socket. The
/// test holds the one job thread and fills the queue (`maxQueuedWork` 1) itself, so the request
/// it then sends finds the queue full, always, and the answer is the HTTP API's.
@Suite struct GatewayJobQueueTests {
    /// A gateway serving on its own thread: its port, its job pool, and the way to drain it.
    struct Running: Sendable {
        let port: Int
        let jobs: JobRunner
        let mailbox: Mailbox
        let drain: @Sendable () -> Void
        let stopped: DispatchSemaphore
    }

    static func start(_ config: GatewayConfig) throws -> Running {
        let handoff = Mutex<Result<Running, any Error>?>(nil)
        let ready = DispatchSemaphore(value: 0), stopped = DispatchSemaphore(value: 0)
        let thread = Thread {
            do {
                let gateway = try Gateway(config: config, logger: Logger(label: "job-queue"))
                // Only the loop thread opens it: the drain is posted there.
                let bound = ThreadBound(gateway)
                let running = Running(
                    port: gateway.port, jobs: gateway.jobs, mailbox: gateway.mailbox,
                    drain: { bound.value.beginDrain(reason: "test") }, stopped: stopped)
                handoff.withLock { $0 = .success(running) }
                ready.signal()
                gateway.run()
            } catch {
                handoff.withLock { $0 = .failure(error) }
                ready.signal()
            }
            stopped.signal()
        }
        thread.start()
        #expect(ready.wait(timeout: .now() + 10) == .success)
        return try handoff.withLock { $0! }.get()
    }

    /// Sends `request` on a new connection and reads the whole answer (the request closes it).
    static func exchange(_ request: String, port: Int) throws -> String {
        let client = try TestClient(port: port)
        defer { client.close() }
        client.send(Array(request.utf8))
        return String(decoding: client.readAll(), as: UTF8.self)
    }

    /// A WebSocket client frame: text, final, masked, under 126 bytes.
    static func maskedText(_ text: String) -> [UInt8] {
        let payload = Array(text.utf8), mask: [UInt8] = [0x11, 0x22, 0x33, 0x44]
        precondition(payload.count < 126)
        return [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    static func createStore(_ name: String, port: Int) throws -> String {
        let body = "{\"name\":\"\(name)\"}"
        return try exchange(
            "POST /api/stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)", port: port)
    }

    /// A gateway with one job thread and room for one more piece of work in its queue.
    static func startWithOneJobThread() throws -> Running {
        var config = GatewayConfig()
        config.host = "127.0.0.1"
        config.port = 0
        config.jobThreads = 1
        config.maxQueuedWork = 1
        return try start(config)
    }

    /// Holds the one job thread and takes the one place in the queue; `release` lets both go,
    /// and `queuedRan` is signalled once the queued work has run.
    static func fillTheJobQueue(of gateway: Running) -> (release: DispatchSemaphore, queuedRan: DispatchSemaphore) {
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), queuedRan = DispatchSemaphore(value: 0)
        #expect(gateway.jobs.submit { held.signal(); release.wait() })
        #expect(held.wait(timeout: .now() + 10) == .success)
        #expect(gateway.jobs.submit { queuedRan.signal() })
        return (release, queuedRan)
    }

    /// A store request over HTTP is answered `503 over_capacity`, and a commit over WebSocket the
    /// `unavailable` error with its `ref`, while the job queue is full; then both are served.
    @Test func aStoreRequestPastTheQueuedWorkIsAnswered503OverCapacity() throws {
        let gateway = try Self.startWithOneJobThread()
        #expect(try Self.createStore("queued", port: gateway.port).hasPrefix("HTTP/1.1 201 "))
        let ws = try TestClient(port: gateway.port)
        ws.send(Array((
            "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                + "Sec-WebSocket-Protocol: receptionist.v1\r\n\r\n").utf8))
        let upgraded = String(decoding: ws.read { $0.count >= 4 && $0.suffix(4) == Array("\r\n\r\n".utf8) }, as: UTF8.self)
        #expect(upgraded.hasPrefix("HTTP/1.1 101 "))
        func commit(_ ref: String) -> String {
            ws.send(Self.maskedText(
                #"{"type":"commit","store":"queued","ref":""# + ref + #"","changes":[{"op":"put","model":"m","value":{"n":1}}]}"#))
            // The answer's frame: short and unmasked, its text after the two header bytes.
            return String(decoding: ws.read { $0.count >= 2 && $0.count >= 2 + Int($0[1]) }.dropFirst(2), as: UTF8.self)
        }

        // The one job thread waits for `release`; the one place in the queue is taken.
        let (release, queuedRan) = Self.fillTheJobQueue(of: gateway)

        let refused = try Self.createStore("refused", port: gateway.port)
        #expect(refused.hasPrefix("HTTP/1.1 503 "))
        #expect(refused.contains("\"error\":\"over_capacity\""))
        #expect(refused.contains("\"detail\":\"the job queue is full; retry later\""))
        let unavailable = commit("r1")
        #expect(unavailable.contains(#""type":"error""#) && unavailable.contains(#""code":"unavailable""#))
        #expect(unavailable.contains(#""ref":"r1""#) && unavailable.contains("the job queue is full"))

        // With the queue free again, the same request is served: the refusal was the bound's.
        release.signal()
        #expect(queuedRan.wait(timeout: .now() + 10) == .success)
        let created = try Self.createStore("created", port: gateway.port)
        #expect(created.hasPrefix("HTTP/1.1 201 "))
        let committed = commit("r2")
        #expect(committed.contains(#""type":"committed""#) && committed.contains(#""ref":"r2""#), "\(committed)")
        ws.close()

        _ = gateway.mailbox.post(gateway.drain)
        #expect(gateway.stopped.wait(timeout: .now() + 20) == .success)
    }

    /// The listings of every store and every topic are built on a job thread, never on the loop
    /// (30,000 stores took the loop 0.6 s a listing, and every client waited): with the job
    /// thread held and the queue full they are refused `503 over_capacity`, while the loop goes on
    /// answering `/healthz`; then they are served.
    @Test func theListingsOfStoresAndTopicsAreBuiltOnAJobThread() throws {
        let gateway = try Self.startWithOneJobThread()
        func get(_ path: String) throws -> String {
            try Self.exchange("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", port: gateway.port)
        }
        let (release, queuedRan) = Self.fillTheJobQueue(of: gateway)
        for path in ["/api/stores", "/api/topics"] {
            let refused = try get(path)
            #expect(refused.hasPrefix("HTTP/1.1 503 ") && refused.contains("\"error\":\"over_capacity\""), "\(path): \(refused)")
        }
        #expect(try get("/healthz").hasPrefix("HTTP/1.1 200 "))
        release.signal()
        #expect(queuedRan.wait(timeout: .now() + 10) == .success)
        #expect(try get("/api/stores").hasPrefix("HTTP/1.1 200 "))
        #expect(try get("/api/topics").contains("{\"topics\":[]}"))
        _ = gateway.mailbox.post(gateway.drain)
        #expect(gateway.stopped.wait(timeout: .now() + 20) == .success)
    }
}
