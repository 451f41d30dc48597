import ReceptionistWire

/// Which web origins may open WebSockets and call the HTTP API from a browser.
///
/// With no list, only the gateway's own origin may: the `Origin` header's host and port must
/// equal the request's `Host`. A request without `Origin` is not from a browser page, so
/// cross-site WebSocket hijacking cannot apply to it, and it passes. `"*"` allows every origin.
///
/// A gateway listening on loopback only takes its own origin by an address or `localhost`, never
/// by another name: a page of any site can point its own name at 127.0.0.1 (DNS rebinding), and
/// would then be "the gateway's own origin" for every request it sends. Its API is not reached
/// by another `Host` either (`allowsHost`), unless a listed origin names it.
struct OriginPolicy: Sendable {
    /// Lower-cased origins such as `https://app.example.com`.
    let allowed: [String]
    /// The gateway listens on loopback only: the same-origin default takes no host by name.
    let loopbackOnly: Bool

    init(allowed: [String], loopbackOnly: Bool = false) {
        self.allowed = allowed.map { Self.normalise($0) }
        self.loopbackOnly = loopbackOnly
    }

    var allowsAny: Bool { allowed.contains("*") }

    /// Whether a request carrying this `Origin` (nil when absent) may proceed.
    func allows(origin: String?, host: String?) -> Bool {
        guard let origin else { return true }
        let normalised = Self.normalise(origin)
        if allowsAny || allowed.contains(normalised) { return true }
        guard allowed.isEmpty, let host, let authority = Self.authority(of: normalised) else { return false }
        return authority == host.lowercased() && (!loopbackOnly || Self.cannotBeRebound(authority))
    }

    /// Whether a request for `host` (its `Host` field) may reach the API: on loopback only by an
    /// address, `localhost`, or the host of a listed origin. A page's own-origin reads carry no
    /// `Origin`, so a rebound page is told by its `Host` alone.
    func allowsHost(_ host: String) -> Bool {
        guard loopbackOnly, !allowsAny else { return true }
        // Every API request asks: an address is told from its bytes, without a copy.
        if Self.isIPv4Authority(host) { return true }
        let authority = host.lowercased()
        return Self.cannotBeRebound(authority) || allowed.contains { Self.authority(of: $0) == authority }
    }

    /// Whether `authority` is `a.b.c.d` or `a.b.c.d:port`, each of a to d 0 to 255.
    static func isIPv4Authority(_ authority: String) -> Bool {
        // Read in place: the UTF-8 view's iterator cost some 20 instructions a byte, on every
        // API request's Host.
        var authority = authority
        return authority.withUTF8(isIPv4Authority)
    }

    private static func isIPv4Authority(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var parts = 0, digits = 0, value = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                digits += 1
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                guard digits <= 3, value <= 255 else { return false }
            case UInt8(ascii: "."), UInt8(ascii: ":"):
                guard digits > 0 else { return false }
                parts += 1
                if byte == UInt8(ascii: ":") { return parts == 4 } // the port, checked by the parser
                digits = 0
                value = 0
            default:
                return false
            }
        }
        return digits > 0 && parts == 3
    }

    /// Whether `host[:port]` names the gateway by an IP address or `localhost`, which no other
    /// site can point at it.
    static func cannotBeRebound(_ authority: String) -> Bool {
        if authority.hasPrefix("[") { return true } // an IPv6 address; HTTPHost checked its form
        let name = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)[0]
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        return isIPv4Authority(String(name))
    }

    /// The CORS headers for an allowed cross-origin request; none when `Origin` is absent. A page
    /// may read the headers the API answers with beyond the safe ones: a model's tag, whether a
    /// publish was replayed, when to retry.
    func corsHeaders(origin: String?) -> [(String, String)] {
        guard let origin else { return [] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "ETag, Idempotent-Replayed, Retry-After, Location"),
        ]
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`): every
    /// request header the API reads may be sent (conditions and idempotency keys included).
    func preflight(origin: String) -> [(String, String)] {
        corsHeaders(origin: origin) + [
            ("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE"),
            ("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID, Idempotency-Key, If-Match, If-None-Match"),
            ("Access-Control-Max-Age", "600"),
        ]
    }

    private static func normalise(_ origin: String) -> String {
        var text = origin.lowercased()
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    /// `host:port` of `scheme://host:port`, or nil for `null` and other opaque origins.
    private static func authority(of origin: String) -> String? {
        let parts = origin.split(separator: "/", omittingEmptySubsequences: false)
        // "scheme:", "", "host:port"
        guard parts.count == 3, parts[0].hasSuffix(":"), parts[1].isEmpty, !parts[2].isEmpty else { return nil }
        return String(parts[2])
    }
}
