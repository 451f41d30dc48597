import ReceptionistWire

/// How a route answers: at once on the loop, later on the loop, by work that must run on a job
/// thread, or by handing the connection to another protocol.
enum RouteResult {
    case reply(Reply)
    /// Started on the loop, which hands it the answer's door; the answer comes through it on the
    /// loop, once (Redis's reply, say), and is written in request order. No thread waits.
    case later((@escaping (Reply) -> Void) -> Void)
    /// Runs on a job thread; its reply is sent back to the loop and written in request order.
    /// The connection starts its next request once the work has returned.
    case work(@Sendable () -> Reply)
    /// Started on the loop like `later`, with the handoff to run its job-thread work on: work a
    /// connection's later requests must not overtake (a commit, a read of what it wrote). The
    /// connection starts its next request once that work has returned, or the answer is given.
    case job((_ handoff: JobHandoff, _ done: @escaping (Reply) -> Void) -> Void)
    /// A WebSocket upgrade request for this kind of session; the handshake is checked next.
    /// `grant` holds the claims of a `?token=` already verified, or what the connect hook needs.
    case upgrade(WebSocketSession.Mode, grant: StreamGrant)
    /// An SSE stream of a store or topic, already checked, as the request asks for it.
    case stream(StreamTarget, StreamAsk, grant: StreamGrant)
}
