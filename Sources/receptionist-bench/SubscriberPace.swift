/// Keeps a publisher at most `ahead` messages in front of the average subscriber, as a backend
/// that watches its consumers would: the subscriber processes count their deliveries in shared
/// files (`SharedCounter`), and before each send the publisher compares what it has sent with
/// the deliveries so far divided by the subscribers. Without it a publisher that the server
/// answers at once runs seconds ahead of the clients, and the latency measured is the clients'
/// backlog.
///
/// Loop thread only.
final class SubscriberPace {
    let ahead: Int
    let subscribers: Int
    private let counters: [SharedCounter]

    init(files: [String], subscribers: Int, ahead: Int) throws {
        counters = try files.map { try SharedCounter(path: $0, create: false) }
        self.subscribers = max(1, subscribers)
        self.ahead = ahead
    }

    /// Messages the average subscriber has been delivered.
    var averageDelivered: Int {
        Int(counters.reduce(UInt64(0)) { $0 &+ $1.value } / UInt64(subscribers))
    }

    /// How many of `wanted` messages may go now, `sent` having gone before.
    func allowance(_ wanted: Int, sent: Int) -> Int {
        Self.allowance(wanted, sent: sent, averageDelivered: averageDelivered, ahead: ahead)
    }

    static func allowance(_ wanted: Int, sent: Int, averageDelivered: Int, ahead: Int) -> Int {
        max(0, min(wanted, ahead - (sent - averageDelivered)))
    }
}
