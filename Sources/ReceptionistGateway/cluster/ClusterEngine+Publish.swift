import ReceptionistLoop
import ReceptionistModel

extension ClusterEngine {
    /// Publishes through Redis. The message waits with the others of this loop iteration for the
    /// same server (`PublishBatcher`); at the iteration's end each batch is one script call, and
    /// all of them leave in the connection's one write. `completion` gets the message's number
    /// once this node has it too: at once when the batch follows the last message this node has
    /// (it is mirrored from the reply, one round trip), or once the node has read it back
    /// otherwise; within `--redis-timeout` either way.
    func publish(topic name: String, data: [UInt8], completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        let index = ShardMap.index(of: name, shards: shards.count)
        let link = shards[index]
        guard link.isUp else { return completion(.failure(.unavailable(link.refusal))) }
        guard !link.commands.isSaturated else { return completion(.failure(.unavailable(link.refusal))) }
        publishers[index].add(
            PublishBatch.Message(topic: name, data: data, publishedAt: Clock.microsecondsSinceEpoch()), PublishBatch.Waiter(answer: completion))
    }

    /// Sends one batch to `link` as one script call and answers each of its publishes.
    func send(_ batch: PublishBatch, _ waiters: [PublishBatch.Waiter], to link: RedisLink) {
        let answers = PublishAnswers(loop: loop, seconds: timeoutSeconds, waiters: waiters)
        let following = batch.topics.map { topicReader($0.name) }
        let now = loop.nowMilliseconds, renewal = redisHistory.topicKeysRenewalMilliseconds
        // What this node has read of each topic: Redis behind it in that epoch came back with
        // older data, and the script starts a new epoch rather than hand its numbers out again.
        let arguments = batch.arguments(
            keys: link.keys, nodeChannel: link.nodeChannel, history: redisHistory, known: { following[$0].follower.known(following[$0].reader) },
            renew: { following[$0].follower.renewingKeys(now: now, every: renewal) }, freshEpoch: link.life.freshEpoch)
        let sent = link.commands.eval(ClusterScripts.publish, arguments) { reply in
            defer { for (reader, follower) in following { follower.ownAnswered(reader: reader) } }
            switch reply {
            case .error(let text)?:
                // A script that fails part way keeps what it wrote before: the batch's earlier
                // messages may be published.
                answers.answerAll(.failure(.outcomeUnknown("Redis failed the call (\(text)); the message may or may not be published")))
            case let reply?:
                guard let numbered = batch.numbered(reply) else {
                    return answers.answerAll(.failure(.outcomeUnknown("Redis answered the publish with something else")))
                }
                for (slot, topic) in batch.topics.enumerated() {
                    Self.answer(topic.indexes, of: batch, numbered[slot], following[slot], answers)
                }
            case nil:
                answers.answerAll(.failure(.outcomeUnknown(
                    "lost the connection to Redis before it answered; the message may or may not be published")))
            }
        }
        if sent {
            for (_, follower) in following { follower.ownSent() }
        } else {
            answers.answerAll(.failure(.unavailable(link.refusal)))
        }
    }

    /// One topic's publishes of a batch, numbered by Redis: mirrored at once when they follow what
    /// this node has, else answered as the node reads them back.
    private static func answer(
        _ indexes: [Int], of batch: PublishBatch, _ numbers: PublishBatch.Numbered,
        _ following: (reader: StreamReader, follower: TopicFollower), _ answers: PublishAnswers
    ) {
        let (reader, follower) = following
        // A batch of one topic is its messages in order, as they are: no copy.
        let messages = indexes.count == batch.messages.count ? batch.messages : indexes.map { batch.messages[$0] }
        if follower.mirror(messages, numbered: numbers, reader: reader) {
            for (offset, index) in indexes.enumerated() { answers.answer(index, .success(numbers.first + UInt64(offset))) }
            return
        }
        for (offset, index) in indexes.enumerated() {
            follower.waitFor(numbers.first + UInt64(offset), epoch: numbers.epoch, reader: reader) { answers.answer(index, $0) }
        }
        reader.read()
    }
}
