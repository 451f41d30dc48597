import Dispatch
import Foundation
import Glibc
import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

/// A throwaway `redis-server` on a free loopback port, without persistence.
private final class RedisServer {
    let port: Int
    private let process: Process

    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server") }

    init() throws {
        port = Self.freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(process.processIdentifier, &status, 0)
    }

    private static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

@Suite(.enabled(if: RedisServer.isInstalled, "needs redis-server"))
struct RedisConnectionTests {
    /// Connects (retrying while the server starts), runs commands, and gets the messages published
    /// on both channels of a second connection, subscribed to them in one command and told so once.
    @Test func commandsAndPubSubOnTheLoop() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let endpoint = RedisEndpoint(port: server.port, database: 1)
        let results = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let loopThread = LoopThread { loop in
            let commands = RedisConnection(loop: loop, endpoint: endpoint, name: "commands")
            let events = RedisConnection(loop: loop, endpoint: endpoint, name: "events")
            // The messages and the command replies come on two connections, in either order.
            func record(_ line: String) {
                let count = results.withLock { $0.append(line); return $0.count }
                guard count == 7 else { return }
                commands.close()
                events.close()
                loop.mailbox.shutDown()
                done.signal()
            }
            // Begun once both are connected: each retries while the server starts, and a command
            // sent while its connection waits to retry is refused (under load, the commands
            // connection could still be waiting when the other had subscribed).
            var connected = 0
            let begin = {
                connected += 1
                guard connected == 2 else { return }
                events.subscribe(["news", "sport"], subscribed: {
                    record("subscribed")
                    commands.send(["SET", "k", "v"]) { reply in record("SET \(reply?.text ?? "nil")") }
                    commands.send(["GET", "k"]) { reply in record("GET \(reply?.text ?? "nil")") }
                    commands.send([Array("PUBLISH".utf8), Array("news".utf8), [0, 1, 2]]) { reply in
                        record("PUBLISH \(reply?.integer ?? -1)")
                    }
                    commands.send(["PUBLISH", "sport", "goal"]) { reply in record("PUBLISH \(reply?.integer ?? -1)") }
                }, message: { payload in record("message \(payload)") })
            }
            commands.onConnected = begin
            events.onConnected = begin
            commands.start()
            events.start()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(loopThread.waitUntilStopped(seconds: 5))
        #expect(results.withLock { $0.sorted() } == [
            "GET v", "PUBLISH 1", "PUBLISH 1", "SET OK", "message [0, 1, 2]", "message \(Array("goal".utf8))", "subscribed",
        ])
    }

    /// A connection finds a dead peer by itself: keep-alive probes after 15 s of quiet, and data
    /// unacknowledged for 30 s ends it. Without them, a Redis host gone or a flow a firewall
    /// dropped held the connection, and every reply owed on it, for the kernel's 15 minutes.
    @Test func aConnectionProbesForADeadPeer() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let endpoint = RedisEndpoint(port: server.port)
        let settings = Mutex<(Int32, Int32)?>(nil)
        onLoop { loop, finish in
            let connection = RedisConnection(loop: loop, endpoint: endpoint, name: "probed")
            connection.onConnected = {
                connection.send(["PING"]) { _ in
                    settings.withLock { $0 = connection.deadPeerSettings.map { ($0.keepAliveIdleSeconds, $0.unackedMilliseconds) } }
                    connection.close()
                    finish()
                }
            }
            connection.start()
        }
        let read = settings.withLock { $0 }
        #expect(read?.0 == 15 && read?.1 == 30_000, "\(String(describing: read))")
    }

    /// A reply read in place says what its copy says: a stream read's nested arrays and bulk
    /// strings (binary ones included), a status, an integer and a nil.
    @Test func aReplyReadInPlaceReadsAsItsCopy() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let endpoint = RedisEndpoint(port: server.port, database: 2)
        let seen = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let loopThread = LoopThread { loop in
            let connection = RedisConnection(loop: loop, endpoint: endpoint, name: "views")
            func check(_ command: [String], _ read: @escaping (RedisReplyView) -> String, last: Bool = false) {
                let copy = Mutex<RedisReply?>(nil)
                connection.send(command) { reply in copy.withLock { $0 = reply } }
                connection.send(command: RedisArguments(command).command(), viewing: { view in
                    guard let view else { return }
                    let copied = copy.withLock { $0 }
                    seen.withLock { $0.append("\(command[0]) \(view.copied == copied) \(read(view))") }
                    if last {
                        connection.close()
                        loop.mailbox.shutDown()
                        done.signal()
                    }
                })
            }
            connection.onConnected = {
                connection.send([Array("XADD".utf8), Array("s".utf8), Array("1-1".utf8), Array("d".utf8), [0, 255, 10]]) { _ in }
                check(["XRANGE", "s", "-", "+"]) { view in
                    let entry = view.elements?.first?.elements
                    let fields = entry?[1].elements
                    return "\(entry?[0].text ?? "-") \(fields?[0].isBulk("d") == true) \(fields?[1].bytes ?? [])"
                }
                check(["SET", "k", "v"]) { view in "\(view.text ?? "-") \(view.isBulk("OK")) \(view.elements == nil)" }
                check(["STRLEN", "k"]) { view in "\(view.text ?? "-") \(view.bytes == nil)" }
                check(["GET", "missing"], { view in "\(view.text ?? "-") \(view.isBulk(""))" }, last: true)
            }
            connection.start()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(loopThread.waitUntilStopped(seconds: 5))
        #expect(seen.withLock { $0 } == ["XRANGE true 1-1 true [0, 255, 10]", "SET true OK false true", "STRLEN true - true", "GET true - false"])
    }

    /// A refused connection reports the failure and keeps retrying; `close` stops it.
    @Test func refusedConnectionRetriesUntilClosed() {
        let failures = Mutex(0)
        onLoop { loop, finish in
            let connection = RedisConnection(
                loop: loop, endpoint: RedisEndpoint(port: 1), name: "refused",
                backoff: RedisBackoff(initialMilliseconds: 5, maxMilliseconds: 5))
            connection.onDisconnected = { _ in
                if failures.withLock({ $0 += 1; return $0 }) == 3 {
                    #expect(connection.send(["PING"]) { _ in } == false)
                    connection.close()
                    finish()
                }
            }
            connection.start()
        }
    }

    /// A close asked from inside a reply callback, after a command queued in the same callback:
    /// the command is still written and answered. (A write from inside a callback could free the
    /// context under hiredis, so the close waits for the loop's next turn.) Before, the command
    /// was never written, and its caller got nothing at the close's time-out.
    @Test func aCloseFromAReplyCallbackStillSendsWhatWasQueued() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let answer = Mutex<String?>(nil)
        let started = Mutex<UInt64>(0)
        let endpoint = RedisEndpoint(port: server.port)
        onLoop { loop, finish in
            let connection = RedisConnection(loop: loop, endpoint: endpoint, name: "closing")
            connection.onConnected = {
                connection.send(["PING"]) { _ in
                    started.withLock { $0 = loop.nowMilliseconds }
                    connection.send(["SET", "k", "v"]) { reply in
                        answer.withLock { $0 = reply.map { _ in "reply" } ?? "nil" }
                        started.withLock { $0 = loop.nowMilliseconds - $0 }
                        finish()
                    }
                    connection.close()
                }
            }
            connection.start()
        }
        #expect(answer.withLock { $0 } == "reply")
        #expect(started.withLock { $0 } < 1000, "answered at once, not at the close's time-out")
    }

    /// A reply and the peer's reset read in one wake-up (the loop was busy meanwhile): libuv stops
    /// the poll and reports the error; the reply is read, and the socket must still be watched,
    /// so the reset ends the connection and the reply still owed is answered (with nothing).
    /// Before, the poll stayed stopped and that reply was owed for good.
    @Test func aReplyReadWithThePeersResetLeavesTheSocketWatched() throws {
        let server = try ResettingServer()
        let answers = Mutex<[String]>([])
        onLoop { loop, finish in
            let connection = RedisConnection(loop: loop, endpoint: RedisEndpoint(port: server.port), name: "reset")
            connection.onConnected = {
                connection.send(["PING"]) { reply in answers.withLock { $0.append(reply == nil ? "nil" : "PONG") } }
                connection.send(["GET", "k"]) { reply in
                    answers.withLock { $0.append(reply == nil ? "nil" : "value") }
                    connection.close()
                    finish()
                }
                // Busy past the commands' write: the answer and the reset arrive before the next poll.
                let busy = LoopTimer(loop: loop) { usleep(300_000) }
                busy.start(delayMilliseconds: 1)
                _ = Unmanaged.passRetained(busy)
            }
            connection.start()
        }
        #expect(answers.withLock { $0 } == ["PONG", "nil"])
    }

    /// Closing a connection still connecting (its SYN unanswered: the listener's queue is full)
    /// with a command owed: the command is answered with nothing at once, and nothing keeps the
    /// loop running. Before, the disconnect waited for that reply, which never came, so the loop
    /// never stopped (a gateway's shutdown hung), or hiredis freed the context without a callback.
    @Test func closingWhileConnectingAnswersWhatIsOwedAndLeavesNothing() throws {
        let (listener, port) = Self.loopbackListener(backlog: 0)
        // One connection fills the queue of a listener that never accepts: the next SYN is dropped.
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        defer { close(filler); close(listener) }
        let answered = Mutex<[String]>([])
        onLoop { loop, finish in
            let connection = RedisConnection(loop: loop, endpoint: RedisEndpoint(port: port), name: "connecting")
            connection.start()
            let later = LoopTimer(loop: loop) {
                #expect(connection.send(["PING"]) { reply in answered.withLock { $0.append(reply == nil ? "nil" : "reply") } })
                connection.close()
                finish()
            }
            later.start(delayMilliseconds: 200)
            _ = Unmanaged.passRetained(later)
        }
        #expect(answered.withLock { $0 } == ["nil"])
    }

    /// A socket listening on a free loopback port, and the port.
    static func loopbackListener(backlog: Int32) -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listen(fd, backlog)
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Accepts one connection, reads until both commands are in, answers the first and resets.
    private final class ResettingServer: Sendable {
        let port: Int

        init() throws {
            let (listener, port) = RedisConnectionTests.loopbackListener(backlog: 1)
            self.port = port
            Thread.detachNewThread {
                let client = accept(listener, nil, nil)
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !String(decoding: received, as: UTF8.self).contains("GET") {
                    let count = read(client, &buffer, buffer.count)
                    if count <= 0 { break }
                    received += buffer[0..<count]
                }
                _ = "+PONG\r\n".withCString { write(client, $0, 7) }
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                close(client)
                close(listener)
            }
        }
    }

    /// Runs `body` on a real loop thread; it calls `finish` once done, which stops the loop.
    /// Fails if that takes more than 10 s, or the loop does not stop.
    private func onLoop(_ body: @escaping @Sendable (EventLoop, _ finish: @escaping () -> Void) -> Void) {
        let done = DispatchSemaphore(value: 0)
        let loopThread = LoopThread { loop in
            body(loop) {
                loop.mailbox.shutDown()
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(loopThread.waitUntilStopped(seconds: 5))
    }
}
