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
        while let (length, accepted) = Self.response(in: buffer, from: consumed) {
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

    /// The length of the complete response starting at `start`, and whether it was a 2xx, if it is all here.
    private static func response(in bytes: [UInt8], from start: Int) -> (Int, Bool)? {
        guard let end = ResponseHead.end(in: bytes, from: start) else { return nil }
        let lines = ResponseHead.lines(in: bytes, from: start, to: end)
        let bodyLength = ResponseHead.value(of: "content-length:", in: bytes, lines: lines.dropFirst()).flatMap { Int($0) } ?? 0
        let total = end + 4 - start + bodyLength
        guard bytes.count - start >= total else { return nil }
        return (total, ResponseHead.line(lines[0], of: bytes, startsWith: "http/1.1 2"))
    }
}
