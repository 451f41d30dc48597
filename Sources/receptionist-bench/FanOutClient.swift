import ReceptionistLoop
import ReceptionistWire
import ReceptionistModel

/// One WebSocket subscriber: the opening handshake, one topic subscription, then every server
/// frame decoded and each one that carries a publisher's `sentAt` timed against it.
///
/// Loop thread only.
final class FanOutClient: TCPConnectionDelegate {
    private enum Stage {
        case handshaking, subscribing, subscribed, done
    }

    private unowned let run: FanOutRun
    private let connection: TCPConnection
    private var stage = Stage.handshaking
    private var head: [UInt8] = []
    private let expectedAccept: String
    private var decoder: WebSocketDecoder

    /// A response head longer than this is not the 101 we are waiting for.
    private static let maxHeadBytes = 16 * 1024

    init(connection: TCPConnection, run: FanOutRun) {
        self.connection = connection
        self.run = run
        decoder = WebSocketDecoder(role: .client, maxMessageBytes: run.maxMessageBytes)
        var nonce = [UInt8](repeating: 0, count: 16)
        for i in nonce.indices { nonce[i] = .random(in: 0...255) }
        let key = Base64.encode(nonce)
        expectedAccept = WebSocketHandshake.acceptKey(for: key)
        connection.delegate = self
        connection.startReading()
        connection.write(
            Array(
                ("GET \(run.path) HTTP/1.1\r\nHost: \(run.host):\(run.port)\r\nUpgrade: websocket\r\n"
                    + "Connection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
                    + (run.subprotocol.map { "Sec-WebSocket-Protocol: \($0)\r\n" } ?? "") + "\r\n").utf8))
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
        head.append(contentsOf: bytes)
        guard let end = Self.headEnd(head) else {
            if head.count > Self.maxHeadBytes { fail("no end to the response head") }
            return
        }
        let text = String(decoding: head[..<end], as: UTF8.self)
        let lines = text.split(separator: "\r\n")
        guard let status = lines.first, status.hasPrefix("HTTP/1.1 101") else {
            fail("handshake answered \(lines.first ?? "nothing")")
            return
        }
        let accept = lines.dropFirst().first { $0.lowercased().hasPrefix("sec-websocket-accept:") }
        let value = accept.map { $0.dropFirst("sec-websocket-accept:".count).trimmingSpaces } ?? ""
        guard value == expectedAccept else {
            fail("wrong Sec-WebSocket-Accept")
            return
        }
        let rest = Array(head[(end + 4)...])
        head = []
        run.clientDidConnect()
        if let message = run.subscribeMessage {
            stage = .subscribing
            connection.write(WebSocketEncoder.text(message, maskKey: .random(in: .min ... .max)))
        } else {
            stage = .subscribed
            run.clientDidSubscribe()
        }
        if !rest.isEmpty {
            rest.withUnsafeBytes { readFrames($0) }
        }
    }

    /// Where "\r\n\r\n" starts, if the head is complete.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4)
        where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
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

    private static let subscribedPrefix = Array(#"{"type":"subscribed""#.utf8)
    private static let snapshotPrefix = Array(#"{"type":"snapshot""#.utf8)
    private static let sentAtKey = Array(#""sentAt":"#.utf8)
    private static let committedAtKey = Array(#""committedAt":"#.utf8)

    /// A byte scan instead of a JSON parse: the client must stay cheaper than the server it measures.
    /// Any frame with the publisher's `sentAt` is a delivery: Receptionist's `message` carries the
    /// body as `data`, and the peers send the body itself. So is a store's `changes` frame, timed
    /// from its `committedAt`.
    private func handle(_ text: UnsafeBufferPointer<UInt8>, now: Int64) {
        if let stamp = Self.number(after: Self.sentAtKey, in: text) ?? Self.number(after: Self.committedAtKey, in: text) {
            run.record(latency: now - stamp, at: now)
        } else if stage == .subscribing
            && (Self.hasPrefix(text, Self.subscribedPrefix) || Self.hasPrefix(text, Self.snapshotPrefix))
        {
            stage = .subscribed
            run.clientDidSubscribe()
        } else if Self.hasPrefix(text, Array(#"{"type":"error""#.utf8)) {
            fail("server error: \(String(decoding: text, as: UTF8.self))")
        }
    }

    private static func hasPrefix(_ text: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard text.count >= prefix.count else { return false }
        for i in prefix.indices where text[i] != prefix[i] { return false }
        return true
    }

    private static func number(after key: [UInt8], in text: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard text.count > key.count else { return nil }
        var i = 0
        search: while i <= text.count - key.count {
            for j in key.indices where text[i + j] != key[j] {
                i += 1
                continue search
            }
            var position = i + key.count
            var value: Int64 = 0
            var digits = 0
            while position < text.count, text[position] >= 48, text[position] <= 57 {
                value = value * 10 + Int64(text[position] - 48)
                position += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
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

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
