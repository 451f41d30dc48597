import ReceptionistLoop
import ReceptionistSync

/// One keep-alive HTTP connection of the publisher: writes whole POSTs (pipelined up to the
/// publisher's window) and counts the responses by their heads and Content-Length.
///
/// Loop thread only.
final class PublisherConnection: TCPConnectionDelegate, PoolConnection {
    private unowned let publisher: Publisher
    private let connection: TCPConnection
    private var buffer: [UInt8] = []
    /// Requests written and not yet answered.
    private(set) var outstanding = 0
    private(set) var isOpen = true
    var canSend: Bool { isOpen }

    init(connection: TCPConnection, publisher: Publisher) {
        self.connection = connection
        self.publisher = publisher
        connection.delegate = self
        connection.startReading()
    }

    func send(_ request: SharedBytes) {
        outstanding += 1
        connection.write(request)
    }

    func close() {
        isOpen = false
        connection.close()
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        var consumed = 0
        while let (length, accepted) = ResponseHead.response(in: buffer, from: consumed) {
            consumed += length
            outstanding -= 1
            publisher.didAnswer(accepted: accepted)
        }
        if consumed > 0 { buffer.removeFirst(consumed) }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        lost()
    }

    func connectionDidDrain(_ connection: TCPConnection) {}

    func connectionDidClose(_ connection: TCPConnection) {
        lost()
    }

    private func lost() {
        guard isOpen else { return }
        isOpen = false
        publisher.didLose(self, unanswered: outstanding)
        connection.close()
    }
}
