/// Who holds a connection, as presence shows it: the subscription token's `sub` and `info`.
/// One per token a connection presented, shared by its subscriptions; a connection without a
/// token has none, and is shown with an empty user.
///
/// Immutable, so a subscription keeps the one it joined with: a later `auth` cannot make its
/// leave count against another user.
public final class PresenceUser {
    /// The token's `sub`; never empty (a token without one has no `PresenceUser` unless it has `info`).
    public let user: String
    /// The token's `info` claim as compact JSON text (an object of at most 1 KiB), or nil.
    public let info: [UInt8]?

    public init(user: String, info: [UInt8]?) {
        self.user = user
        self.info = info
    }
}
