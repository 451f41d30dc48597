/// The topics published to since their last fan-out, for a fan-out deferred to the end of the
/// loop's turn (`PushHub.deferTopicFanOut`).
///
/// A topic published to 32 times in one turn then walks its subscribers once, not 32 times, and
/// each subscriber's connection is handed one buffer holding the 32 frames. Nothing waits longer
/// than it did: the connections flush at the end of the same turn, after the queue has run.
///
/// Loop thread only.
final class FanOutQueue {
    private let schedule: () -> Void
    private var topics: [Topic] = []
    /// The storage of `topics` while `run` works through it: swapped in and cleared after, never
    /// copied, so that the queue allocates nothing once it has grown.
    private var running: [Topic] = []

    /// `schedule` arranges one call of `run` at the end of the current turn.
    init(schedule: @escaping () -> Void) {
        self.schedule = schedule
    }

    /// `topic` has its first message of the turn.
    func add(_ topic: Topic) {
        if topics.isEmpty { schedule() }
        topics.append(topic)
    }

    func run() {
        while !topics.isEmpty {
            swap(&topics, &running)
            for topic in running {
                topic.fanOutUnsent()
            }
            running.removeAll(keepingCapacity: true)
        }
    }
}
