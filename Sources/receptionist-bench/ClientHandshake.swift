import ReceptionistWire

/// The client side of a WebSocket opening handshake: the upgrade request with a fresh key, and
/// the check of the server's 101 response as its bytes arrive.
struct ClientHandshake {
    enum Outcome {
        /// The response head is not complete yet.
        case incomplete
        /// Upgraded; `rest` holds the bytes that followed the head (the first frames, if any), and
        /// `extensions` the server's `Sec-WebSocket-Extensions`, if it answered one.
        case accepted(rest: [UInt8], extensions: String?)
        case refused(String)
    }

    /// The upgrade request, ready to write.
    let request: [UInt8]
    private let expectedAccept: String
    private var head: [UInt8] = []

    /// A response head longer than this is not the 101 we are waiting for.
    private static let maxHeadBytes = 16 * 1024

    /// With `offerDeflate`, the request offers permessage-deflate (RFC 7692) as browsers do.
    init(host: String, port: Int, path: String, subprotocol: String?, offerDeflate: Bool = false) {
        var nonce = [UInt8](repeating: 0, count: 16)
        for i in nonce.indices { nonce[i] = .random(in: 0...255) }
        let key = Base64.encode(nonce)
        expectedAccept = WebSocketHandshake.acceptKey(for: key)
        request = Array(
            ("GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
                + (subprotocol.map { "Sec-WebSocket-Protocol: \($0)\r\n" } ?? "")
                + (offerDeflate ? "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" : "")
                + "\r\n").utf8)
    }

    /// Takes the next bytes of the response.
    mutating func read(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        head.append(contentsOf: bytes)
        guard let end = Self.headEnd(head) else {
            return head.count > Self.maxHeadBytes ? .refused("no end to the response head") : .incomplete
        }
        let text = String(decoding: head[..<end], as: UTF8.self)
        let lines = text.split(separator: "\r\n")
        guard let status = lines.first, status.hasPrefix("HTTP/1.1 101") else {
            return .refused("handshake answered \(lines.first ?? "nothing")")
        }
        let accept = lines.dropFirst().first { $0.lowercased().hasPrefix("sec-websocket-accept:") }
        let value = accept.map { $0.dropFirst("sec-websocket-accept:".count).trimmingSpaces } ?? ""
        guard value == expectedAccept else { return .refused("wrong Sec-WebSocket-Accept") }
        let rest = Array(head[(end + 4)...])
        head = []
        let extensions = lines.dropFirst().first { $0.lowercased().hasPrefix("sec-websocket-extensions:") }
        return .accepted(rest: rest, extensions: extensions.map { String($0.dropFirst("sec-websocket-extensions:".count).trimmingSpaces) })
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
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
