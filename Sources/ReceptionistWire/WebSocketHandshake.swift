/// The server side of the WebSocket opening handshake (RFC 6455 section 4.2).
///
/// Pure: it reads a parsed request and returns either the 101 response head to write, or why the
/// request is refused. It carries no Date header, since a 1xx response needs none and this module
/// has no clock.
public enum WebSocketHandshake {
    /// The fixed GUID of RFC 6455 section 1.3 that every server appends to the client's key.
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// base64(SHA-1(key + guid)), proving to the client that the server read its key.
    public static func acceptKey(for key: String) -> String {
        Base64.encode(SHA1.digest(Array((key + guid).utf8)))
    }

    public struct Accepted: Sendable, Equatable {
        /// The subprotocol chosen from the client's offer, or nil when it offered none.
        public let subprotocol: String?
        /// permessage-deflate as agreed, or nil for uncompressed frames.
        public let deflate: PerMessageDeflate?
        /// The whole "HTTP/1.1 101 Switching Protocols" head, ending in an empty line.
        public let response: [UInt8]

        public init(subprotocol: String?, deflate: PerMessageDeflate? = nil, response: [UInt8]) {
            self.subprotocol = subprotocol
            self.deflate = deflate
            self.response = response
        }
    }

    /// Why the upgrade was refused, as the HTTP error response to send instead.
    public struct Refusal: Error, Sendable, Equatable {
        public let status: HTTPStatus
        public let detail: String
        /// Extra response headers, e.g. `Sec-WebSocket-Version: 13` with 426.
        public let headers: HTTPHeaders

        public init(status: HTTPStatus, detail: String, headers: HTTPHeaders = HTTPHeaders()) {
            self.status = status
            self.detail = detail
            self.headers = headers
        }
    }

    /// Checks an upgrade request and, when it is one, builds the 101 response.
    ///
    /// `supported` lists the subprotocols we speak, most preferred first; the first of them that
    /// the client offers is chosen. A client that offers only others is refused rather than
    /// served without one, since it said it cannot speak anything else. With `compression`, the
    /// first permessage-deflate offer we can take is accepted (`PerMessageDeflate`); without,
    /// extensions are ignored and frames go uncompressed.
    public static func accept(_ request: HTTPRequest, supported: [String], compression: Bool = false) -> Result<Accepted, Refusal> {
        guard request.method == .get else {
            return .failure(Refusal(
                status: .methodNotAllowed, detail: "a WebSocket upgrade must be a GET",
                headers: HTTPHeaders([("Allow", "GET")])))
        }
        guard request.versionMajor > 1 || (request.versionMajor == 1 && request.versionMinor >= 1) else {
            return .failure(Refusal(status: .badRequest, detail: "a WebSocket upgrade needs HTTP/1.1"))
        }
        let headers = request.headers
        guard tokens(headers, "Upgrade").contains(where: { $0.asciiCaseInsensitiveEquals("websocket") }) else {
            return .failure(Refusal(status: .badRequest, detail: "missing 'Upgrade: websocket'"))
        }
        guard tokens(headers, "Connection").contains(where: { $0.asciiCaseInsensitiveEquals("upgrade") }) else {
            return .failure(Refusal(status: .badRequest, detail: "missing 'Connection: Upgrade'"))
        }
        // Any version but 13 gets 426 naming the one we speak, so the client can retry with it.
        guard tokens(headers, "Sec-WebSocket-Version") == ["13"] else {
            return .failure(Refusal(
                status: .upgradeRequired, detail: "only WebSocket version 13 is supported",
                headers: HTTPHeaders([("Sec-WebSocket-Version", "13")])))
        }
        let keys = headers.values("Sec-WebSocket-Key")
        guard keys.count == 1 else {
            return .failure(Refusal(status: .badRequest, detail: "expected one Sec-WebSocket-Key"))
        }
        let key = String(keys[0][...].trimmingSpaces())
        guard let nonce = Base64.decode(key), nonce.count == 16 else {
            return .failure(Refusal(status: .badRequest, detail: "Sec-WebSocket-Key must be base64 of 16 bytes"))
        }
        let offered = tokens(headers, "Sec-WebSocket-Protocol")
        var subprotocol: String?
        if !offered.isEmpty {
            // Subprotocol names are compared exactly: RFC 6455 makes them case-sensitive.
            guard let chosen = supported.first(where: { offered.contains($0) }) else {
                return .failure(Refusal(
                    status: .badRequest,
                    detail: "no offered subprotocol is supported; supported: \(supported.joined(separator: ", "))"))
            }
            subprotocol = chosen
        }
        let deflate = compression ? PerMessageDeflate.negotiate(headers.values("Sec-WebSocket-Extensions")) : nil
        return .success(Accepted(
            subprotocol: subprotocol, deflate: deflate, response: response(key: key, subprotocol: subprotocol, deflate: deflate)))
    }

    private static func response(key: String, subprotocol: String?, deflate: PerMessageDeflate? = nil) -> [UInt8] {
        let status = HTTPStatus.switchingProtocols
        var head = "HTTP/1.1 \(status.code) \(status.reason)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Accept: \(acceptKey(for: key))\r\n"
        if let subprotocol {
            head += "Sec-WebSocket-Protocol: \(subprotocol)\r\n"
        }
        if let deflate {
            head += "Sec-WebSocket-Extensions: \(deflate.response)\r\n"
        }
        head += "\r\n"
        return Array(head.utf8)
    }

    /// The comma-separated elements of every `name` header, trimmed, empty ones dropped.
    private static func tokens(_ headers: HTTPHeaders, _ name: String) -> [String] {
        headers.values(name).flatMap { $0.split(separator: ",") }.map { String($0.trimmingSpaces()) }.filter { !$0.isEmpty }
    }
}
