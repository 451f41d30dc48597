/// One complete HTTP/1.x request, head and body.
public struct HTTPRequest: Sendable, Hashable {
    public var method: HTTPMethod
    /// The request target exactly as sent, e.g. `/static/a.css?x=1`.
    public var target: String
    public var versionMajor: Int
    public var versionMinor: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Whether the connection may stay open after this request (HTTP/1.1 default, or 1.0 keep-alive).
    public var keepAlive: Bool
    /// Whether the client asked to switch protocols (`Connection: upgrade`).
    public var isUpgrade: Bool

    public init(
        method: HTTPMethod, target: String, versionMajor: Int = 1, versionMinor: Int = 1,
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], keepAlive: Bool = true, isUpgrade: Bool = false
    ) {
        self.method = method
        self.target = target
        self.versionMajor = versionMajor
        self.versionMinor = versionMinor
        self.headers = headers
        self.body = body
        self.keepAlive = keepAlive
        self.isUpgrade = isUpgrade
    }

    /// The target's path, still percent-encoded, without the query.
    public var rawPath: Substring {
        guard let mark = queryMark else { return target[...] }
        return target[..<mark]
    }

    /// The target's query string without the `?`, or nil.
    public var query: Substring? {
        guard let mark = queryMark else { return nil }
        return target[target.utf8.index(after: mark)...]
    }

    /// Where the target's `?` is, found in its bytes in place (the UTF-8 view's generic
    /// `firstIndex` was 1% of an HTTP publish).
    private var queryMark: String.Index? {
        var text = target
        let offset = text.withUTF8 { bytes in bytes.firstIndex(of: UInt8(ascii: "?")) }
        return offset.map { target.utf8.index(target.utf8.startIndex, offsetBy: $0) }
    }

    /// A target in absolute form (`http://host/path?query`, which a server must accept: RFC 9112,
    /// section 3.2.2) as the path and query it names; any other target as it is.
    static func originForm(_ target: String) -> String {
        guard let schemeLength = absoluteSchemeLength(target) else { return target }
        let utf8 = target.utf8
        let rest = utf8.dropFirst(schemeLength)
        guard let start = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) else { return "/" }
        let tail = String(target[start...])
        return utf8[start] == UInt8(ascii: "/") ? tail : "/" + tail
    }

    /// The authority of a target in absolute form (`host:port` in `http://host:port/path`), or nil
    /// for any other target. A server takes it in place of the Host field (RFC 9112, section 3.2.2).
    static func absoluteAuthority(_ target: String) -> String? {
        guard let schemeLength = absoluteSchemeLength(target) else { return nil }
        let rest = target.utf8.dropFirst(schemeLength)
        let end = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
        return String(target[rest.startIndex..<(end ?? rest.endIndex)])
    }

    /// How long the `http://` or `https://` opening a target in absolute form is; nil for a path.
    private static func absoluteSchemeLength(_ target: String) -> Int? {
        let utf8 = target.utf8
        // Most targets are already paths: one byte looked at.
        guard let first = utf8.first, first != UInt8(ascii: "/") else { return nil }
        let scheme = String(decoding: utf8.prefix(8).map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }, as: UTF8.self)
        if scheme.hasPrefix("http://") { return 7 }
        if scheme.hasPrefix("https://") { return 8 }
        return nil
    }
}
