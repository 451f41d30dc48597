/// What the checks before a stream granted it: until when its token holds, and the origin to
/// answer CORS for.
struct StreamGrant: Sendable {
    /// Seconds since the Unix epoch when the subscription token expires; nil without a token.
    var expiresAt: Double?
    /// The allowed cross-origin `Origin` to echo in `Access-Control-Allow-Origin`.
    var corsOrigin: String?
}
