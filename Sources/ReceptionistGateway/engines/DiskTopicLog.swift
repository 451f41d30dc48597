import ReceptionistDisk
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush

/// The `disk` engine's topics: a message is numbered here, stored by the disk engine's writer
/// (with every other write waiting then: one sync), and only then put in the topic's history,
/// handed to its subscribers and answered. The loop never waits for the disk.
///
/// Invariants: numbers are handed out in order per topic, and the topic takes a message only
/// once the disk has it, in number order (the writer stores them in the order they were handed
/// out, and its answers come back through the mailbox in that order). If the disk refuses one,
/// it and every later one numbered before the refusal came are refused, and numbering starts
/// again after the last message stored (`DiskTopicNumbers`).
///
/// Loop thread only.
final class DiskTopicLog: TopicLog {
    private let hub: PushHub
    private let engine: DiskEngine
    private let loop: EventLoop
    /// How each topic with messages waiting for the disk numbers them; a topic leaves once none
    /// waits.
    private var numbers: [String: DiskTopicNumbers] = [:]

    init(hub: PushHub, engine: DiskEngine, loop: EventLoop) {
        self.hub = hub
        self.engine = engine
        self.loop = loop
    }

    var answersAtOnce: Bool { false }

    func refusal(for topic: String) -> StoreError? {
        hub.capacityRefusal(forTopic: topic).map { .overCapacity($0) }
    }

    /// The topic's rows go (in write order: after its last message, before a new life's first).
    func release(_ topic: Topic) -> Bool {
        numbers[topic.name] == nil && engine.forgetTopic(topic.name)
    }

    func publish(_ name: String, data: [UInt8], done: @escaping (Result<UInt64, StoreError>) -> Void) {
        if let problem = hub.check(.topic(name)) { return done(.failure(.unavailable(problem.message))) }
        let topic = hub.topic(name)
        var numbering = numbers[name] ?? DiskTopicNumbers()
        let (seq, run) = numbering.next(after: topic.seq)
        let publishedAt = Clock.microsecondsSinceEpoch()
        let answer = LoopBound((self, topic, done), loop: loop)
        let mailbox = loop.mailbox
        let accepted = engine.appendMessage(topic: name, epoch: topic.epoch, seq: seq, publishedAt: publishedAt, data: data) {
            [mailbox] error in
            // On the writer's thread: the answer goes to the loop (posts keep their order).
            _ = mailbox.post {
                let (log, topic, done) = answer.value
                log.stored(topic, seq: seq, run: run, publishedAt: publishedAt, data: data, error: error, done: done)
            }
        }
        guard accepted else {
            return done(.failure(.unavailable("the disk's write queue is full (\(engine.options.maxQueued) writes); retry")))
        }
        numbers[name] = numbering
        topic.publishesInFlight += 1
    }

    private func stored(
        _ topic: Topic, seq: UInt64, run: UInt64, publishedAt: UInt64, data: [UInt8], error: StoreError?,
        done: (Result<UInt64, StoreError>) -> Void
    ) {
        let name = topic.name
        topic.publishesInFlight -= 1
        if var numbering = numbers[name] {
            numbering.answered(run: run, failed: error != nil, stored: topic.seq)
            numbers[name] = numbering.isIdle ? nil : numbering
        }
        if let error { return done(.failure(error)) }
        topic.mirror(seq: seq, publishedAt: publishedAt, data: data)
        done(.success(seq))
    }
}
