import ReceptionistWire

/// What the checks before a stream granted it: the subscription token's claims, and the origin
/// to answer CORS for.
struct StreamGrant: Sendable {
    /// The verified subscription token's claims; nil when the gateway needs no token.
    var claims: TokenClaims?
    /// The allowed cross-origin `Origin` to echo in `Access-Control-Allow-Origin`.
    var corsOrigin: String?
    /// Set when the connection brought no token and the connect hook must admit it first.
    var connect: ConnectRequest?
    /// Whether the subscribe hook decides what the claims do not cover (the session asks it).
    var subscribeHook = false

    /// Whether the subscribe hook may be asked about `target` (and its `presence`): it is set,
    /// and the connect hook has yet to grant the stream, or its token does not cover them.
    func hookMayDecide(_ target: StreamTarget, presence: Bool) -> Bool {
        subscribeHook && (connect != nil || claims.map { !$0.allows(target) || (presence && !$0.allowsPresence(of: target)) } ?? false)
    }
}

/// What the connect hook is told of a connection that brought no token (`docs/HOOKS.md`).
struct ConnectRequest: Sendable {
    var remoteAddress: String
    /// `Cookie`, `Authorization` and the headers `--hook-forward-header` names, lower-cased; a
    /// field sent on several lines as one value (RFC 9110 section 5.3; cookies joined by "; ",
    /// as RFC 9113 section 8.2.3 has it).
    var headers: [(name: String, value: String)]

    init(_ request: HTTPRequest, remoteAddress: String, forward: [String]) {
        self.remoteAddress = remoteAddress
        headers = []
        for name in ["cookie", "authorization"] + forward.map({ $0.lowercased() }) where !headers.contains(where: { $0.name == name }) {
            let values = request.headers.values(name)
            guard !values.isEmpty else { continue }
            headers.append((name, values.joined(separator: name == "cookie" ? "; " : ", ")))
        }
    }
}
