/// How a route answers: at once on the loop, or by work that must run on a job thread.
enum RouteResult {
    case reply(Reply)
    /// Runs on a job thread; its reply is sent back to the loop and written in request order.
    case work(@Sendable () -> Reply)
}
