import ReceptionistPush
import ReceptionistWire

/// The state a WebSocket and an SSE session share: their subscriptions and their token. Stored
/// inline in each session, so an idle connection pays no extra object for it; the behaviour over
/// it is `StreamSession`'s.
///
/// Loop thread only.
struct StreamCore {
    /// A connection holds a handful of subscriptions: searched linearly, the first inline, they
    /// cost an idle connection far less memory than a dictionary, or an array, would.
    var subscriptions = InlineFirstList<Subscription>()
    /// The connection's presence id, made by the gateway.
    let clientID: UInt64
    /// What the client presented: a subscription token's claims, checked on every subscribe when
    /// the gateway requires tokens (the stream ends when they expire), and what its publishes are
    /// counted against once it gave a valid API key. Boxed: most connections present nothing, and
    /// an idle connection then pays one pointer for it.
    private var credentials: Credentials?

    private final class Credentials {
        var claims: TokenClaims? {
            // Who presence shows: the token's `sub` and `info`, made once per token presented.
            didSet { presenceUser = claims.flatMap(Self.presenceUser) }
        }
        var publishRateKey: String?
        /// The claims came from the connect hook: the refresh hook may extend them.
        var fromHook = false
        /// A refresh hook call is under way, or was made and not answered.
        var refreshing = false
        /// When the refresh hook is next asked (seconds since the Unix epoch), once it extended
        /// the grant; before, `refreshLeadSeconds` before the grant's end.
        var refreshAt: Double?
        /// The subscriptions the subscribe hook allowed, which no token covered: a new token does
        /// not end them (`StreamSession.endSubscriptionsNotCovered`). Held, not named by address:
        /// a subscription made where an ended one was is not taken for it. Those that ended go at
        /// the next grant, so at most one more than the connection holds.
        var hookGranted: [Subscription] = []
        private(set) var presenceUser: PresenceUser?

        private static func presenceUser(_ claims: TokenClaims) -> PresenceUser? {
            let user = claims.subject ?? ""
            guard !user.isEmpty || claims.info != nil else { return nil }
            return PresenceUser(user: user, info: claims.info)
        }
    }

    init(services: StreamServices, claims: TokenClaims?) {
        clientID = services.nextClientID()
        self.claims = claims
    }

    var presenceUser: PresenceUser? { credentials?.presenceUser }

    var claims: TokenClaims? {
        get { credentials?.claims }
        set { presented { $0.claims = newValue } }
    }

    var publishRateKey: String? {
        get { credentials?.publishRateKey }
        set { presented { $0.publishRateKey = newValue } }
    }

    /// Whether the claims are the connect hook's (set with them), which the refresh hook extends.
    var grantFromHook: Bool {
        get { credentials?.fromHook ?? false }
        set { presented { $0.fromHook = newValue } }
    }

    var refreshing: Bool {
        get { credentials?.refreshing ?? false }
        set { presented { $0.refreshing = newValue } }
    }

    var refreshAt: Double? {
        get { credentials?.refreshAt }
        set { presented { $0.refreshAt = newValue } }
    }

    /// Whether the subscribe hook allowed `subscription` (`granted`), not a token.
    func isHookGranted(_ subscription: Subscription) -> Bool {
        credentials?.hookGranted.contains { $0 === subscription } ?? false
    }

    /// Records that the subscribe hook allowed `subscription`; forgets those that ended.
    mutating func markHookGranted(_ subscription: Subscription) {
        let live = subscriptions
        presented { box in
            box.hookGranted.removeAll { granted in !live.contains { $0 === granted } }
            box.hookGranted.append(subscription)
        }
    }

    /// A new box for every change (they are rare: an `auth` message), so no copy of this value
    /// ever sees another's change.
    private mutating func presented(_ change: (Credentials) -> Void) {
        let box = Credentials()
        box.claims = credentials?.claims
        box.publishRateKey = credentials?.publishRateKey
        box.fromHook = credentials?.fromHook ?? false
        box.refreshing = credentials?.refreshing ?? false
        box.refreshAt = credentials?.refreshAt
        box.hookGranted = credentials?.hookGranted ?? []
        change(box)
        credentials = box.claims == nil && box.publishRateKey == nil && box.hookGranted.isEmpty ? nil : box
    }

    /// Whether the token ran out by `nowSeconds` (seconds since the Unix epoch).
    func tokenExpired(nowSeconds: Double) -> Bool {
        guard let claims = credentials?.claims else { return false }
        return nowSeconds >= claims.expiresAt
    }

    /// Why this stream may not subscribe to `target` (following its presence too, with
    /// `presence`), or nil if it may: the token (unless the subscribe hook allowed it, `granted`),
    /// then the per-connection limit. Each refusal is counted.
    func permission(
        for target: StreamTarget, presence: Bool = false, granted: Bool = false, services: StreamServices
    ) -> ClientMessage.Problem? {
        let counters = services.counters
        if services.access.requiresToken, !granted {
            guard let claims else {
                counters.refused(.tokenMissing)
                return ClientMessage.Problem(.unauthorized, "subscriptions need a token: send {\"type\":\"auth\",\"token\":…} first")
            }
            guard claims.allows(target) else {
                counters.refused(.tokenScope)
                return ClientMessage.Problem(.forbidden, "the token does not cover \(target)")
            }
            guard !presence || claims.allowsPresence(of: target) else {
                counters.refused(.tokenScope)
                return ClientMessage.Problem(.forbidden, "the token's presence claim does not cover \(target)")
            }
        }
        if presence, !services.config.namespaces.allowsPresence(of: target.name) {
            return ClientMessage.Problem(.forbidden, "presence is off for \(target) (its namespace)")
        }
        let limit = services.config.maxSubscriptionsPerConnection
        guard subscriptions.count < limit else {
            counters.refused(.subscriptionLimit)
            return ClientMessage.Problem(.tooManySubscriptions, "a connection may hold at most \(limit) subscriptions")
        }
        return nil
    }
}
