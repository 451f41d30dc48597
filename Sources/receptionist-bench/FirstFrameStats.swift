/// When each subscriber got its first frame (`subscribed` or `snapshot`): counted from a common
/// origin (the start of a reconnect storm, say, so that several client processes' figures line
/// up), and from the moment it sent its subscribe (the server's answer alone).
struct FirstFrameStats {
    /// Wall-clock microseconds since the Unix epoch that first-frame times count from.
    let origin: Int64
    /// A first frame later than this after `origin` counts as late: a failure to the caller.
    let boundMicroseconds: Int64
    private(set) var count = 0
    private(set) var late = 0
    private(set) var maxMicroseconds: Int64 = 0
    /// Origin to first frame, one recording per subscriber.
    private(set) var fromOrigin = LatencyHistogram()
    /// Subscribe sent to first frame, one recording per subscriber.
    private(set) var answer = LatencyHistogram()
    private(set) var maxAnswerMicroseconds: Int64 = 0

    init(origin: Int64, boundMicroseconds: Int64) {
        self.origin = origin
        self.boundMicroseconds = boundMicroseconds
    }

    mutating func record(subscribeSentAt sentAt: Int64, at now: Int64) {
        let elapsed = now - origin
        count += 1
        if elapsed > boundMicroseconds { late += 1 }
        maxMicroseconds = max(maxMicroseconds, elapsed)
        fromOrigin.record(elapsed)
        maxAnswerMicroseconds = max(maxAnswerMicroseconds, now - sentAt)
        answer.record(now - sentAt)
    }

    var json: String {
        #"{"origin_us":\#(origin),"bound_us":\#(boundMicroseconds),"count":\#(count),"late":\#(late),"#
            + #""max_us":\#(maxMicroseconds),"histogram_us":\#(fromOrigin.sparseJSON),"#
            + #""answer_max_us":\#(maxAnswerMicroseconds),"answer_histogram_us":\#(answer.sparseJSON)}"#
    }
}
