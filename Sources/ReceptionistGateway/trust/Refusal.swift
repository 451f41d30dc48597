/// Every reason the gateway turns a client away, each counted (`/metrics`) and documented in
/// `docs/SECURITY.md`.
enum Refusal: String, CaseIterable, Sendable {
    case connectionLimit = "connections"
    /// A connection shed unread: the process had no file descriptor left for it.
    case descriptors = "descriptors"
    case addressLimit = "connections_per_address"
    case subscriptionLimit = "subscriptions_per_connection"
    case publishRate = "publish_rate"
    case messageRate = "message_rate"
    case messageTooBig = "message_too_big"
    case apiKey = "api_key"
    case origin = "origin"
    case tokenMissing = "token_missing"
    case tokenInvalid = "token_invalid"
    case tokenExpired = "token_expired"
    case tokenScope = "token_scope"
    case slowConsumer = "slow_consumer"
    /// The connect hook refused a connection, or could not be asked.
    case connectHook = "connect_hook"
    /// A publish, write or subscribe hook refused what a client asked.
    case hookDenied = "hook_denied"
}
