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
        guard let end = Self.headEnd(head) else {
            return head.count > Self.maxHeadBytes ? .refused("no end to the response head") : .incomplete
        }
        // Read as bytes, line by line: only the values asked for become strings (a storm's
        // clients answer ten thousand of these on one core).
        let lines = Self.lines(of: head, upTo: end)
        guard let status = lines.first, Self.text(head[status]).hasPrefix("HTTP/1.1 101") else {
            return .refused("handshake answered \(lines.first.map { Self.text(head[$0]) } ?? "nothing")")
        }
        let headers = lines.dropFirst()
        guard Self.value(of: "sec-websocket-accept:", in: head, lines: headers) == expectedAccept else {
            return .refused("wrong Sec-WebSocket-Accept")
        }
        let extensions = Self.value(of: "sec-websocket-extensions:", in: head, lines: headers)
        let rest = Array(head[(end + 4)...])
        head = []
        return .accepted(rest: rest, extensions: extensions)
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// The ranges of the lines before `end`, split at CRLF.
    private static func lines(of bytes: [UInt8], upTo end: Int) -> [Range<Int>] {
        var lines: [Range<Int>] = []
        var start = 0
        var index = 0
        while index + 1 < end {
            if bytes[index] == 13 && bytes[index + 1] == 10 {
                lines.append(start..<index)
                start = index + 2
                index += 2
            } else {
                index += 1
            }
        }
        lines.append(start..<end)
        return lines
    }

    /// The value, spaces trimmed, of the first header line that starts with `name` (lowercase,
    /// colon included) in any case.
    private static func value(of name: String, in bytes: [UInt8], lines: ArraySlice<Range<Int>>) -> String? {
        let wanted = Array(name.utf8)
        for line in lines where line.count >= wanted.count {
            var matches = true
            for (offset, byte) in wanted.enumerated() {
                let found = bytes[line.lowerBound + offset]
                // ASCII lower case: what differs from `byte` only in the 0x20 bit of a letter.
                if found != byte && !(found >= 65 && found <= 90 && found | 0x20 == byte) {
                    matches = false
                    break
                }
            }
            guard matches else { continue }
            var value = (line.lowerBound + wanted.count)..<line.upperBound
            while let first = value.first, bytes[first] == 32 { value = (first + 1)..<value.upperBound }
            while let last = value.last, bytes[last] == 32 { value = value.lowerBound..<last }
            return text(bytes[value])
        }
        return nil
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
