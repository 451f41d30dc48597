/// What one group of subscribers (those given the same subscription options) received.
struct DeliveryStats {
    /// Subscribers of the group that subscribed.
    var subscribed = 0
    /// Frames that carry a commit or publish time, and the staleness of each: arrival minus the
    /// oldest time it stands for (`firstCommittedAt` when the frame holds several change sets).
    var timed = 0
    var histogram = LatencyHistogram()
    /// `changes` frames with no time in them: a slow subscriber's catch-up after conflation.
    var untimed = 0
    /// Compressed messages counted but not inflated (`--inflate-every`), so not timed.
    var uninflated = 0
    /// Wire bytes of every counted frame: payload and WebSocket header.
    var bytes = 0

    var json: String {
        #"{"subscribed":\#(subscribed),"timed":\#(timed),"untimed":\#(untimed),"uninflated":\#(uninflated),"bytes":\#(bytes),"#
            + #""histogram_us":\#(histogram.sparseJSON)}"#
    }
}
