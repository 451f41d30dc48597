import Dispatch
import Glibc
@testable import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

/// Collects what a client connection reads and signals once `expected` bytes are in.
private final class Collector: TCPConnectionDelegate {
    let expected: Int
    let done: ([UInt8]) -> Void
    var received: [UInt8] = []

    init(expected: Int, done: @escaping ([UInt8]) -> Void) {
        self.expected = expected
        self.done = done
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        received += bytes
        if received.count >= expected {
            done(received)
            connection.close()
        }
    }
    func connectionDidReadEOF(_ connection: TCPConnection) { connection.close() }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) {}
}

/// Answers every read with the peer's address, so the test sees which source the client bound.
private final class AddressEcho: TCPConnectionDelegate {
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        connection.write(Array((connection.peerAddress ?? "?").utf8) + Array(bytes))
        connection.closeAfterFlush()
    }
    func connectionDidReadEOF(_ connection: TCPConnection) { connection.close() }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) {}
}

@Suite struct TCPConnectorTests {
    /// Runs `body` on a fresh loop thread, then waits (bounded) for `result` to be set.
    private func onLoop<R: Sendable>(
        _ body: @escaping @Sendable (EventLoop, @escaping @Sendable (R) -> Void) -> Void
    ) -> R? {
        let result = Mutex<R?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let loop = LoopThread { loop in
            body(loop) { value in
                result.withLock { $0 = value }
                ready.signal()
            }
        }
        let arrived = ready.wait(timeout: .now() + 10) == .success
        let mailbox = loop.mailbox
        _ = mailbox.post { mailbox.shutDown() }
        _ = loop.waitUntilStopped(seconds: 10)
        return arrived ? result.withLock { $0 } : nil
    }

    @Test(.timeLimit(.minutes(10)))
    func connectsFromTheGivenSourceAddressAndExchangesBytes() {
        let reply: [UInt8]? = onLoop { loop, finish in
            let listener = try! TCPListener(loop: loop, host: "127.0.0.1", port: 0)
            listener.onConnection = { connection in
                connection.delegate = AddressEcho()
                connection.startReading()
            }
            TCPConnector.connect(loop: loop, host: "127.0.0.1", port: listener.localPort, sourceHost: "127.0.0.2") { result in
                guard case .success(let connection) = result else { return finish([]) }
                let expected = "127.0.0.2hello".utf8.count
                connection.delegate = Collector(expected: expected) { bytes in
                    listener.close()
                    finish(bytes)
                }
                connection.startReading()
                connection.write(Array("hello".utf8))
            }
        }
        #expect(reply.map { String(decoding: $0, as: UTF8.self) } == "127.0.0.2hello")
    }

    @Test(.timeLimit(.minutes(10)))
    func aRefusedConnectReportsAnError() {
        // A port that was just free and has no listener.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                _ = bind(fd, pointer, length)
                return getsockname(fd, pointer, &length)
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        close(fd)

        let refused: Bool? = onLoop { loop, finish in
            TCPConnector.connect(loop: loop, host: "127.0.0.1", port: port) { result in
                if case .failure = result { finish(true) } else { finish(false) }
            }
        }
        #expect(refused == true)
    }
}
