import ReceptionistLoop

/// A connection that subscriptions write to: a WebSocket or an SSE stream.
///
/// Loop thread only.
protocol PushSink: AnyObject {
    /// Whether the bytes the kernel has refused on this connection are past `--max-queued-bytes`.
    var isOverLimit: Bool { get }
    /// Queues a shared event in this transport's framing.
    func send(_ event: PushEvent)
    /// The subscriber fell too far behind on a stream that cannot be conflated (a topic): the sink
    /// ends the connection with a documented code, and the client resumes from the history.
    func slowConsumer(_ subscription: Subscription)
}
