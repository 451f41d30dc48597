import Dispatch
import Foundation
import Glibc
import ReceptionistSync
@testable import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

/// Echoes reads three writes at a time, to check corking and ordering.
private final class Echo: TCPConnectionDelegate {
    var onClose: () -> Void = {}
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        // Three writes in one callback must leave as one contiguous, ordered stream.
        let data = Array(bytes)
        let third = data.count / 3
        connection.write(Array(data[..<third]))
        connection.write(Array(data[third..<(2 * third)]))
        connection.write(Array(data[(2 * third)...]))
    }
    func connectionDidReadEOF(_ connection: TCPConnection) { connection.closeAfterFlush() }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) { onClose() }
}

/// Sends a large blob on connect, then closes after it has been flushed.
private final class Blaster: TCPConnectionDelegate {
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEOF(_ connection: TCPConnection) { connection.close() }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) {}
}

/// On the peer's EOF, asks to read again and answers what the connection then says: whether the
/// peer has finished, and whether reading started again (it must not: nothing more can come).
private final class ReadAfterEOF: TCPConnectionDelegate {
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEOF(_ connection: TCPConnection) {
        connection.startReading()
        connection.write(Array("finished=\(connection.peerFinished) reading=\(connection.flags.contains(.reading))".utf8))
        connection.closeAfterFlush()
    }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) {}
}

/// A blocking client socket with timeouts, for tests.
struct TestClient {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if status != 0 { throw POSIXErrorCode(rawValue: errno).map { POSIXError($0) } ?? POSIXError(.EIO) }
    }

    func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, 0) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads until EOF, a time-out, or `limit` bytes.
    func readAll(limit: Int = .max) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count < limit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[..<n]
        }
        return out
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }
    func close() { Glibc.close(fd) }
}

@Suite struct TCPConnectionTests {
    /// Starts a loop with a listener whose connections get `makeDelegate()`; returns the port.
    private func serve(
        _ makeDelegate: @escaping @Sendable () -> any TCPConnectionDelegate,
        onConnection: @escaping @Sendable (TCPConnection) -> Void = { _ in }
    ) -> (loop: LoopThread, port: Int, stop: @Sendable () -> Bool) {
        let port = Mutex(0)
        let listenerBox = Mutex<LoopBound<TCPListener>?>(nil)
        let loop = LoopThread { loop in
            let listener = try! TCPListener(loop: loop, host: "127.0.0.1", port: 0)
            listener.onConnection = { connection in
                connection.delegate = makeDelegate()
                connection.startReading()
                onConnection(connection)
            }
            port.withLock { $0 = listener.localPort }
            listenerBox.withLock { $0 = LoopBound(listener, loop: loop) }
        }
        let listener = listenerBox.withLock { $0! }
        let mailbox = loop.mailbox
        // Closing the listener and the mailbox lets the loop finish.
        let stop: @Sendable () -> Bool = {
            _ = mailbox.post {
                listener.value.close()
                mailbox.shutDown()
            }
            return loop.waitUntilStopped(seconds: 10)
        }
        return (loop, port.withLock { $0 }, stop)
    }

    @Test(.timeLimit(.minutes(10)))
    func writesInOneCallbackLeaveInOrder() throws {
        let (_, port, stop) = serve({ Echo() })
        #expect(port > 0)
        let client = try TestClient(port: port)
        let message = Array((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        client.send(message)
        client.shutdownWrite()
        let echoed = client.readAll()
        client.close()
        #expect(echoed == message)
        #expect(stop())
    }

    @Test(.timeLimit(.minutes(10)))
    func readingDoesNotStartAgainAfterThePeersEOF() throws {
        let (_, port, stop) = serve({ ReadAfterEOF() })
        let client = try TestClient(port: port)
        client.shutdownWrite()
        let answer = String(decoding: client.readAll(), as: UTF8.self)
        client.close()
        #expect(answer == "finished=true reading=false")
        #expect(stop())
    }

    @Test(.timeLimit(.minutes(10)))
    func aLargeWriteSurvivesPartialWrites() throws {
        let blob = SharedBytes((0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 / 7) })
        let (_, port, stop) = serve({ Blaster() }, onConnection: { connection in
            // More than the socket buffer can take at once, so uv_write finishes the job.
            connection.write(blob)
            connection.write([1, 2, 3])
            connection.closeAfterFlush()
        })
        let client = try TestClient(port: port)
        let received = client.readAll()
        client.close()
        #expect(received.count == blob.count + 3)
        #expect(Array(received.prefix(blob.count)) == blob.array)
        #expect(Array(received.suffix(3)) == [1, 2, 3])
        #expect(stop())
    }
}
