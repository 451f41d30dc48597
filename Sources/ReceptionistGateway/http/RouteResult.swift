import ReceptionistWire

/// How a route answers: at once on the loop, by work that must run on a job thread, or by handing
/// the connection to another protocol.
enum RouteResult {
    case reply(Reply)
    /// Runs on a job thread; its reply is sent back to the loop and written in request order.
    case work(@Sendable () -> Reply)
    /// A WebSocket upgrade request for this kind of session; the handshake is checked next.
    /// `claims` are those of a `?token=` already verified.
    case upgrade(WebSocketSession.Mode, claims: TokenClaims?)
    /// An SSE stream of a store or topic, already checked, resuming after `since` when given.
    /// `epoch` is the store epoch `since` belongs to (`?epoch=`); `presence` asks for the members.
    case stream(StreamTarget, since: UInt64?, epoch: String?, options: SubscriptionOptions, presence: Bool, grant: StreamGrant)
}
