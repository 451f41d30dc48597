import ReceptionistWire

/// What the checks before a stream granted it: the subscription token's claims, and the origin
/// to answer CORS for.
struct StreamGrant: Sendable {
    /// The verified subscription token's claims; nil when the gateway needs no token.
    var claims: TokenClaims?
    /// The allowed cross-origin `Origin` to echo in `Access-Control-Allow-Origin`.
    var corsOrigin: String?
}
