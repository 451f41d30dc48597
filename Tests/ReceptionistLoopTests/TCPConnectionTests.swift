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

/// Stops reading at the first bytes, answers, and closes after the answer: the peer's later
/// bytes come while its owner reads nothing.
private final class StopsThenCloses: TCPConnectionDelegate {
    let closed: LoopLog<Bool>
    init(closed: LoopLog<Bool>) { self.closed = closed }
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        connection.stopReading()
        connection.write(Array("bye".utf8))
        connection.closeAfterFlush()
    }
    func connectionDidReadEOF(_ connection: TCPConnection) {}
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) { closed.append(true) }
}

/// Runs `body` when the loop flushes it: scheduled after a connection, it runs in the same pass
/// of the loop's flush, just after that connection has flushed.
private final class FlushProbe: LoopFlushable {
    private let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
    func flush() { body() }
}

/// What the tests below saw on the loop thread.
private final class LoopLog<Entry: Sendable>: Sendable {
    let entries = Mutex<[Entry]>([])
    func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }
    var all: [Entry] { entries.withLock { $0 } }
}

/// Echoes each read in three writes, and counts the `sendmsg` calls that carried them: the loop's
/// `WriteDelay` notes each one (`noteWrite`), so its value is taken after the flush's `tick` and
/// before any connection flushes (an `IterationTask`), and again just after this connection
/// flushed (a `FlushProbe` queued behind it); the notes between the two are the sends. Nil: the
/// two values differ by more than notes.
private final class CountingEcho: TCPConnectionDelegate {
    let sends: LoopLog<Int?>
    init(sends: LoopLog<Int?>) { self.sends = sends }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        let loop = connection.loop
        var before: WriteDelay?
        IterationTask(loop: loop) { before = loop.writeDelay }.schedule()
        let data = Array(bytes)
        let third = data.count / 3
        connection.write(Array(data[..<third]))
        connection.write(Array(data[third..<(2 * third)]))
        connection.write(Array(data[(2 * third)...]))
        let sends = self.sends
        loop.scheduleFlush(FlushProbe {
            guard let before else { return sends.append(nil) }
            sends.append(Self.notes(from: before, to: loop.writeDelay))
        })
    }

    /// How many `noteWrite` calls turn `before` into `after`, if a few do.
    private static func notes(from before: WriteDelay, to after: WriteDelay) -> Int? {
        var counted = before
        for notes in 0...16 {
            if counted == after { return notes }
            counted.noteWrite()
        }
        return nil
    }

    func connectionDidReadEOF(_ connection: TCPConnection) { connection.closeAfterFlush() }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) {}
}

/// One read as a connection's delegate saw it.
private struct SeenRead: Sendable {
    let connection: ObjectIdentifier
    /// Where the bytes lay, and where the loop's read buffer is.
    let address: UInt
    let loopBuffer: UInt
    let count: Int
}

/// Echoes each read in one write, noting where the bytes lay.
private final class RecordingEcho: TCPConnectionDelegate {
    let reads: LoopLog<SeenRead>
    init(reads: LoopLog<SeenRead>) { self.reads = reads }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        reads.append(SeenRead(
            connection: ObjectIdentifier(connection), address: UInt(bitPattern: bytes.baseAddress),
            loopBuffer: UInt(bitPattern: connection.loop.readBuffer), count: bytes.count))
        connection.write(Array(bytes))
    }
    func connectionDidReadEOF(_ connection: TCPConnection) { connection.closeAfterFlush() }
    func connectionDidDrain(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection) {}
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

    /// Invariant 6: three writes in one read callback leave in one `sendmsg`, made by the loop's
    /// flush. Sent one by one, the count would be 3; sent at once inside `write`, before the
    /// flush, it would be 0.
    @Test(.timeLimit(.minutes(10)))
    func writesInOneCallbackLeaveInOneSend() throws {
        let sends = LoopLog<Int?>()
        let (_, port, stop) = serve({ CountingEcho(sends: sends) })
        let client = try TestClient(port: port)
        let first = Array((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let second = Array((0..<999).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        // One message at a time, each echoed in full before the next is sent.
        client.send(first)
        let firstEcho = client.readAll(limit: first.count)
        client.send(second)
        let secondEcho = client.readAll(limit: second.count)
        client.shutdownWrite()
        let rest = client.readAll()
        client.close()
        #expect(firstEcho == first)
        #expect(secondEcho == second)
        #expect(rest.isEmpty)
        #expect(stop())
        let counted = sends.all
        #expect(!counted.isEmpty)
        #expect(counted.allSatisfy { $0 == 1 }, "sends per read callback: \(counted)")
    }

    /// Invariant 8: every connection of a loop reads into the loop's one 64 KiB buffer. Two
    /// connections open at once, one sent more than the buffer holds: every read lies at the
    /// loop's buffer, none is longer, and the bytes still arrive intact. A read buffer per
    /// connection would put the two connections' reads at different addresses.
    @Test(.timeLimit(.minutes(10)))
    func everyConnectionReadsIntoTheLoopsOneBuffer() throws {
        let reads = LoopLog<SeenRead>()
        let (_, port, stop) = serve({ RecordingEcho(reads: reads) })
        let large = try TestClient(port: port)
        let small = try TestClient(port: port)
        let big = Array((0..<200_000).map { UInt8(truncatingIfNeeded: $0 / 3) })
        let little = Array((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 5) })
        large.send(big)
        let bigEcho = large.readAll(limit: big.count)
        small.send(little)
        let littleEcho = small.readAll(limit: little.count)
        large.shutdownWrite()
        small.shutdownWrite()
        #expect(large.readAll().isEmpty && small.readAll().isEmpty)
        large.close()
        small.close()
        #expect(stop())
        #expect(bigEcho == big)
        #expect(littleEcho == little)

        let seen = reads.all
        let connections = Set(seen.map(\.connection))
        #expect(connections.count == 2)
        #expect(seen.reduce(0) { $0 + $1.count } == big.count + little.count)
        #expect(seen.allSatisfy { $0.address == $0.loopBuffer && $0.address != 0 })
        #expect(Set(seen.map(\.address)).count == 1, "every read of every connection lies in one buffer")
        #expect(seen.allSatisfy { $0.count <= EventLoop.readBufferSize })
        #expect(EventLoop.readBufferSize == 64 * 1024)
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

    /// A connection that shut its side down lingers reading out, and dropping, what the peer
    /// still sends, though its owner had stopped reading: unread bytes at the close would reset
    /// the connection and cut off a reply still on its way. So the peer's EOF is seen, and the
    /// connection closes then; with reading left stopped, it would wait for its owner to close it.
    @Test(.timeLimit(.minutes(10)))
    func aLingeringConnectionReadsOutThePeerThoughItsOwnerStoppedReading() throws {
        let closed = LoopLog<Bool>()
        let (_, port, stop) = serve({ StopsThenCloses(closed: closed) })
        let client = try TestClient(port: port)
        client.send(Array("hello".utf8))
        #expect(String(decoding: client.readAll(), as: UTF8.self) == "bye")
        client.send([UInt8](repeating: 0x61, count: 4096))
        client.shutdownWrite()
        let deadline = Date().addingTimeInterval(5)
        while closed.all.isEmpty && Date() < deadline { usleep(5_000) }
        client.close()
        #expect(closed.all == [true])
        #expect(stop())
    }

    @Test(.timeLimit(.minutes(10)))
    func aLargeWriteSurvivesPartialWrites() throws {
        let blob = SharedBytes((0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 / 7) })
        let (_, port, stop) = serve({ Blaster() }, onConnection: { connection in
            // More than the socket buffer can take at once: the kernel holds part of the queue
            // back, and the connection's poll, watching for writability, sends the rest.
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
