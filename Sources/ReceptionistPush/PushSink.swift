/// What happened to an event offered to a sink, as uWebSockets' `send` says what happened to a
/// message: there is no separate "is it full?" question whose answer could be ignored.
public enum SendOutcome: Sendable, Equatable {
    /// Queued on the connection.
    case queued
    /// Not queued: the connection's backlog is past its limit. The caller applies its policy: a
    /// store subscription conflates, a topic subscription is ended (invariant 20).
    case overLimit
    /// Not queued: the connection is closing and takes nothing more.
    case refused
}

/// A connection that subscriptions write to: a WebSocket or an SSE stream, or a test's fake.
///
/// Loop thread only.
public protocol PushSink: AnyObject {
    /// Offers a live event (a change set or a topic message), queued only while the connection's
    /// backlog is within its limit.
    func send(_ event: PushEvent) -> SendOutcome
    /// Queues a message the subscriber is owed whatever the subscription's policy: its snapshot,
    /// the `subscribed` that opens a resume, a `gap`, or the catch-up of a conflated subscription.
    /// A sink may still refuse one past its own hard limit, ending the stream (`.overLimit`).
    @discardableResult
    func sendOwed(_ event: PushEvent) -> SendOutcome
    /// The subscriber fell too far behind on a stream that cannot be conflated (a topic): the sink
    /// ends the connection with a documented code, and the client resumes from the history.
    func endSlowConsumer(_ subscription: Subscription)
    /// The gateway ended `subscription` itself (its store was deleted), after sending it the
    /// `unsubscribed` that says so: the sink forgets it, so the client may subscribe again.
    func subscriptionEnded(_ subscription: Subscription)
    /// The connection's presence id: one per connection, for all its subscriptions, never the
    /// same for two connections of one gateway at once.
    var clientID: UInt64 { get }
    /// Who holds the connection (a token's `sub` and `info`), or nil for nobody in particular.
    var presenceUser: PresenceUser? { get }
}
