import ReceptionistLoop
import ReceptionistWire

/// One WebSocket of the change publisher: the opening handshake, then masked text frames out, and
/// every text frame back counted as the acknowledgement of one message.
///
/// Loop thread only.
final class ChangePublisherConnection: TCPConnectionDelegate, PoolConnection {
    private unowned let publisher: ChangePublisher
    private let connection: TCPConnection
    private var handshake: ClientHandshake
    private var decoder = WebSocketDecoder(role: .client)
    private(set) var isReady = false
    var canSend: Bool { isReady }
    private(set) var isOpen = true
    /// Messages written and not yet acknowledged.
    private(set) var outstanding = 0

    init(connection: TCPConnection, publisher: ChangePublisher, host: String, port: Int, path: String) {
        self.connection = connection
        self.publisher = publisher
        handshake = ClientHandshake(host: host, port: port, path: path, subprotocol: nil)
        connection.delegate = self
        connection.startReading()
        connection.write(handshake.request)
    }

    func send(_ text: String) {
        outstanding += 1
        connection.write(WebSocketEncoder.text(text, maskKey: .random(in: .min ... .max)))
    }

    func close() {
        isOpen = false
        connection.close()
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard isOpen else { return }
        if isReady {
            readFrames(bytes)
            return
        }
        switch handshake.read(bytes) {
        case .incomplete:
            break
        case .refused(let reason):
            lost(reason)
        case .accepted(let rest, _):
            isReady = true
            publisher.connectionDidOpen(self)
            if !rest.isEmpty { rest.withUnsafeBytes { readFrames($0) } }
        }
    }

    private func readFrames(_ bytes: UnsafeRawBufferPointer) {
        let (messages, error) = decoder.decode(bytes)
        for message in messages {
            switch message {
            case .text, .binary:
                outstanding -= 1
                publisher.didAnswer(accepted: true)
            case .ping(let payload):
                connection.write(WebSocketEncoder.frame(.pong, payload: payload, maskKey: .random(in: .min ... .max)))
            case .close:
                lost("the server sent close")
                return
            case .pong:
                break
            }
        }
        if let error { lost("bad frame from the server: \(error)") }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        lost("the server closed the connection")
    }

    func connectionDidDrain(_ connection: TCPConnection) {}

    func connectionDidClose(_ connection: TCPConnection) {
        lost("the connection closed")
    }

    private func lost(_ reason: String) {
        guard isOpen else { return }
        isOpen = false
        let wasReady = isReady
        isReady = false
        publisher.didLose(self, unanswered: outstanding, wasReady: wasReady, reason: reason)
        connection.close()
    }
}
