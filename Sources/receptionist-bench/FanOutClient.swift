import ReceptionistLoop
import ReceptionistWire
import ReceptionistModel

/// One WebSocket subscriber: the opening handshake, one subscription (with its group's options),
/// then every server frame decoded, and each delivery counted with its bytes and timed against
/// the commit or publish time it carries.
///
/// Loop thread only.
final class FanOutClient: TCPConnectionDelegate {
    private enum Stage {
        case handshaking, subscribing, subscribed, done
    }

    private unowned let run: FanOutRun
    private let connection: TCPConnection
    /// Which of the run's option sets this subscriber uses.
    private let group: Int
    private var stage = Stage.handshaking
    private var handshake: ClientHandshake
    private var decoder: WebSocketDecoder

    init(connection: TCPConnection, run: FanOutRun, group: Int) {
        self.connection = connection
        self.run = run
        self.group = group
        decoder = WebSocketDecoder(role: .client, maxMessageBytes: run.maxMessageBytes)
        handshake = ClientHandshake(host: run.host, port: run.port, path: run.path, subprotocol: run.subprotocol)
        connection.delegate = self
        connection.startReading()
        connection.write(handshake.request)
    }

    /// The run is over: close without counting it as a failure.
    func close() {
        stage = .done
        connection.close()
    }

    // MARK: TCPConnectionDelegate

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        switch stage {
        case .handshaking:
            readHandshake(bytes)
        case .subscribing, .subscribed:
            readFrames(bytes)
        case .done:
            break
        }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        fail("the server closed the connection")
    }

    func connectionDidDrain(_ connection: TCPConnection) {}

    func connectionDidClose(_ connection: TCPConnection) {
        if stage != .done {
            fail("the connection closed")
        }
    }

    // MARK: Handshake

    private func readHandshake(_ bytes: UnsafeRawBufferPointer) {
        switch handshake.read(bytes) {
        case .incomplete:
            return
        case .refused(let reason):
            fail(reason)
        case .accepted(let rest):
            run.clientDidConnect()
            if run.subscribeMessages.isEmpty {
                stage = .subscribed
                run.clientDidSubscribe(group: group)
            } else {
                stage = .subscribing
                connection.write(WebSocketEncoder.text(run.subscribeMessages[group], maskKey: .random(in: .min ... .max)))
            }
            if !rest.isEmpty {
                rest.withUnsafeBytes { readFrames($0) }
            }
        }
    }

    // MARK: Frames

    private func readFrames(_ bytes: UnsafeRawBufferPointer) {
        let (messages, error) = decoder.decode(bytes)
        // One clock read per socket read: every frame in it arrived at the same moment.
        let now = Int64(Clock.microsecondsSinceEpoch())
        for message in messages {
            switch message {
            case .text(var text):
                text.withUTF8 { handle($0, now: now) }
            case .ping(let payload):
                connection.write(WebSocketEncoder.frame(.pong, payload: payload, maskKey: .random(in: .min ... .max)))
            case .close:
                fail("the server sent close")
                return
            case .binary, .pong:
                break
            }
        }
        if let error {
            fail("bad frame from the server: \(error)")
        }
    }

    private static let changesPrefix = Array(#"{"type":"changes""#.utf8)
    private static let subscribedPrefix = Array(#"{"type":"subscribed""#.utf8)
    private static let snapshotPrefix = Array(#"{"type":"snapshot""#.utf8)
    private static let errorPrefix = Array(#"{"type":"error""#.utf8)
    private static let sentAtKey = Array(#""sentAt":"#.utf8)
    private static let committedAtKey = Array(#""committedAt":"#.utf8)
    private static let firstCommittedAtKey = Array(#""firstCommittedAt":"#.utf8)

    /// A store's `changes` frame is a delivery, timed from the oldest commit it holds: its
    /// `firstCommittedAt` when it folds several change sets (`maxRate`), else its `committedAt`
    /// (a slow subscriber's conflated catch-up carries neither). A peer relaying such frames sends
    /// the same JSON. Any other frame with a publisher's `sentAt` is a topic delivery:
    /// Receptionist's `message` carries the body as `data`, and the peers send the body itself.
    private func handle(_ text: UnsafeBufferPointer<UInt8>, now: Int64) {
        if FrameScan.hasPrefix(text, Self.changesPrefix) {
            let head = FrameScan.head(text)
            let stamp = FrameScan.number(after: Self.firstCommittedAtKey, in: head)
                ?? FrameScan.number(after: Self.committedAtKey, in: head)
            run.record(group: group, stamp: stamp, bytes: FrameScan.frameBytes(payload: text.count), at: now)
        } else if let stamp = FrameScan.number(after: Self.sentAtKey, in: text) {
            run.record(group: group, stamp: stamp, bytes: FrameScan.frameBytes(payload: text.count), at: now)
        } else if stage == .subscribing
            && (FrameScan.hasPrefix(text, Self.subscribedPrefix) || FrameScan.hasPrefix(text, Self.snapshotPrefix))
        {
            stage = .subscribed
            run.clientDidSubscribe(group: group)
        } else if FrameScan.hasPrefix(text, Self.errorPrefix) {
            fail("server error: \(String(decoding: text, as: UTF8.self))")
        }
    }

    // MARK: Ending

    private func fail(_ reason: String) {
        guard stage != .done else { return }
        let wasSubscribed = stage == .subscribed
        stage = .done
        run.clientDidFail(reason, wasSubscribed: wasSubscribed)
        connection.close()
    }
}
