import ReceptionistWire

/// What an SSE request asks of its stream, besides its target and its grant: where it resumes,
/// which shape it takes, whether it follows presence, and how its heartbeat shows.
struct StreamAsk {
    /// How the stream's heartbeat is written when it has had nothing to send for an interval.
    enum Heartbeat: Equatable {
        /// A comment line (`: heartbeat`), which keeps proxies from timing the stream out but
        /// which `EventSource` hides from the page.
        case comment
        /// A `heartbeat` event the page can hear (`?heartbeat=event`), naming the interval; one
        /// also goes out as soon as the stream opens. A client that hears nothing for an interval
        /// and its own grace takes the gateway as lost.
        case event
    }

    /// Resume after this number (`Last-Event-ID` or `?since=`); nil: from now, or a snapshot.
    var since: UInt64?
    /// The epoch `since` belongs to (`?epoch=`, or `Last-Event-ID`'s `@<epoch>`).
    var epoch: String?
    var options: SubscriptionOptions
    /// Whether the stream follows the target's presence too (`?presence=true`).
    var presence: Bool
    var heartbeat: Heartbeat
}
