import Dispatch
import Foundation
import Glibc
import Logging
import ReceptionistGateway
import ReceptionistLoop
import ReceptionistModel
import ReceptionistSync
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

    /// A blocking client on a loopback socket, each read bounded by 10 s.
    final class Client {
        private var fd: Int32

        init(port: Int) {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            #expect(fd >= 0)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            #expect(connected == 0)
        }

        deinit { close() }

        func close() {
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }

        func send(_ bytes: [UInt8]) {
            #expect(Glibc.send(fd, bytes, bytes.count, 0) == bytes.count)
        }

        /// Reads until `done` holds of everything read, or the peer closes, or a read times out.
        func read(until done: ([UInt8]) -> Bool = { _ in false }) -> [UInt8] {
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !done(answer) {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { break }
                answer += buffer[..<count]
            }
            return answer
        }
    }

    /// Sends `request` on a new connection and reads the whole answer (the request closes it).
    static func exchange(_ request: String, port: Int) -> String {
        let client = Client(port: port)
        client.send(Array(request.utf8))
        return String(decoding: client.read(), as: UTF8.self)
    }

    /// A WebSocket client frame: text, final, masked, under 126 bytes.
    static func maskedText(_ text: String) -> [UInt8] {
        let payload = Array(text.utf8), mask: [UInt8] = [0x11, 0x22, 0x33, 0x44]
        precondition(payload.count < 126)
        return [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    static func createStore(_ name: String, port: Int) -> String {
        let body = "{\"name\":\"\(name)\"}"
        return exchange(
            "POST /api/stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)", port: port)
    }

    /// A store request over HTTP is answered `503 over_capacity`, and a commit over WebSocket the
    /// `unavailable` error with its `ref`, while the job queue is full; then both are served.
    @Test func aStoreRequestPastTheQueuedWorkIsAnswered503OverCapacity() throws {
        var config = GatewayConfig()
        config.host = "127.0.0.1"
        config.port = 0
        config.jobThreads = 1
        config.maxQueuedWork = 1
        let gateway = try Self.start(config)
        #expect(Self.createStore("queued", port: gateway.port).hasPrefix("HTTP/1.1 201 "))
        let ws = Client(port: gateway.port)
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
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), queuedRan = DispatchSemaphore(value: 0)
        #expect(gateway.jobs.submit { held.signal(); release.wait() })
        #expect(held.wait(timeout: .now() + 10) == .success)
        #expect(gateway.jobs.submit { queuedRan.signal() })

        let refused = Self.createStore("refused", port: gateway.port)
        #expect(refused.hasPrefix("HTTP/1.1 503 "))
        #expect(refused.contains("\"error\":\"over_capacity\""))
        #expect(refused.contains("\"detail\":\"the job queue is full; retry later\""))
        let unavailable = commit("r1")
        #expect(unavailable.contains(#""type":"error""#) && unavailable.contains(#""code":"unavailable""#))
        #expect(unavailable.contains(#""ref":"r1""#) && unavailable.contains("the job queue is full"))

        // With the queue free again, the same request is served: the refusal was the bound's.
        release.signal()
        #expect(queuedRan.wait(timeout: .now() + 10) == .success)
        let created = Self.createStore("created", port: gateway.port)
        #expect(created.hasPrefix("HTTP/1.1 201 "))
        let committed = commit("r2")
        #expect(committed.contains(#""type":"committed""#) && committed.contains(#""ref":"r2""#), "\(committed)")
        ws.close()

        _ = gateway.mailbox.post(gateway.drain)
        #expect(gateway.stopped.wait(timeout: .now() + 20) == .success)
    }
}
