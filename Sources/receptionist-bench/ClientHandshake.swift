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
        // Two draws, not sixteen: each draw is a `getrandom` system call, and a storm's clients
        // open ten thousand connections on one core.
        let nonce = [UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max)]
            .flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> ($0 * 8)) } }
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
        guard let end = ResponseHead.end(in: head, from: 0) else {
            return head.count > Self.maxHeadBytes ? .refused("no end to the response head") : .incomplete
        }
        let lines = ResponseHead.lines(in: head, from: 0, to: end)
        guard ResponseHead.line(lines[0], of: head, startsWith: "http/1.1 101") else {
            return .refused("handshake answered \(String(decoding: head[lines[0]], as: UTF8.self))")
        }
        let headers = lines.dropFirst()
        guard ResponseHead.value(of: "sec-websocket-accept:", in: head, lines: headers) == expectedAccept else {
            return .refused("wrong Sec-WebSocket-Accept")
        }
        let extensions = ResponseHead.value(of: "sec-websocket-extensions:", in: head, lines: headers)
        let rest = Array(head[(end + 4)...])
        head = []
        return .accepted(rest: rest, extensions: extensions)
    }
}
