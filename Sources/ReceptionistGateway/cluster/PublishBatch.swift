import ReceptionistLoop
import ReceptionistModel

/// Publishes to one Redis server gathered in one loop iteration, laid out for one call of
/// `ClusterScripts.publish`: grouped by topic, each topic's messages in the order they were
/// published, the topics in the order they first came. Only a topic's own order is kept, which is
/// the only order subscribers see.
///
/// A batch is bounded (`maxMessages`, `maxBytes`) so that one script never holds Redis for long,
/// and so that Redis numbers one batch while the node reads the next: the publishes of a busier
/// iteration go in several batches, one script call each, in order.
///
/// Pure value.
struct PublishBatch: ScriptBatch {
    /// Messages one script call takes at most: as many as one connection's window of pipelined
    /// requests in `bench/cluster.sh`, whose read then leaves as one call. Bigger batches save
    /// little of Redis's work (its per-call part is about three messages') and keep Redis idle
    /// while the node reads them.
    static let maxMessages = 32
    static var capacity: Int { maxMessages }
    /// Bytes of message data one script call takes at most (a batch always takes its first message).
    static let maxBytes = 1 << 20

    struct Message: Equatable {
        let topic: String
        let data: [UInt8]
        /// Microseconds since the epoch, when this node was given the message.
        let publishedAt: UInt64
    }

    /// What waits for a message's number.
    struct Waiter {
        let answer: (Result<UInt64, StoreError>) -> Void
    }

    /// Where Redis put one topic's messages: numbers `first ..< first + count`, in `epoch`, the
    /// last one at stream entry `lastID`, after the entry `previousID` ("0-0": none; nil: not
    /// told, a notice from a node of an earlier version).
    struct Numbered: Equatable {
        let first: UInt64
        let epoch: String
        let lastID: String
        var previousID: String? = nil
    }

    /// Every message, in the order added; an index here is how each is answered.
    private(set) var messages: [Message] = []
    /// Each topic, in the order it first came, with the indexes of its messages in order.
    private(set) var topics: [(name: String, indexes: [Int])] = []
    private var topicIndex: [String: Int] = [:]
    /// The topic the last message went to, looked at before `topicIndex`: a batch is most often
    /// one topic's, which then costs no hashing.
    private var lastSlot = 0
    private var bytes = 0

    var isEmpty: Bool { messages.isEmpty }

    /// Whether no more messages fit.
    var isFull: Bool { messages.count >= Self.maxMessages || bytes >= Self.maxBytes }

    func fits(_ message: Message) -> Bool { fits(message.data.count) }

    /// Whether a message of `count` bytes fits.
    func fits(_ count: Int) -> Bool {
        messages.isEmpty || (messages.count < Self.maxMessages && bytes + count <= Self.maxBytes)
    }

    /// Adds `message` (check `fits` first).
    mutating func append(_ message: Message) {
        let index = messages.count
        // Room for a full batch at once, not grown as it fills.
        if index == 0 { messages.reserveCapacity(Self.maxMessages) }
        messages.append(message)
        bytes += message.data.count
        if index > 0, topics[lastSlot].name == message.topic {
            topics[lastSlot].indexes.append(index)
        } else if let slot = topicIndex[message.topic] {
            topics[slot].indexes.append(index)
            lastSlot = slot
        } else {
            lastSlot = topics.count
            topicIndex[message.topic] = lastSlot
            var indexes = [index]
            // The first topic is most often the only one.
            if lastSlot == 0 { indexes.reserveCapacity(Self.maxMessages) }
            topics.append((message.topic, indexes))
        }
    }

    /// What this node has read of a topic's log: the epoch it follows and the last number in it.
    struct Known: Equatable {
        let epoch: String
        let number: UInt64
    }

    /// What follows the script's digest in `EVALSHA`: the number of keys, each topic's seq, log,
    /// epoch and last-entry keys, then the log's bounds and its keys' lifetime, the cluster's
    /// channel and the publishing node's (`nodeChannel`), the server's life key, and for each topic its notice, a fresh epoch (for a topic that has none, or
    /// whose log Redis holds less of than this node has read), what this node has read of it
    /// (`known`, by the topic's slot; "" and 0 for nothing), whether to renew its keys' lifetime
    /// (`renew`, by slot), its count, and its messages as data and `publishedAt` pairs.
    func arguments(
        keys: ClusterKeys, nodeChannel: String, history: RedisHistory, known: (Int) -> Known? = { _ in nil },
        renew: (Int) -> Bool = { _ in false }, freshEpoch: () -> String
    ) -> RedisArguments {
        var arguments = RedisArguments(capacity: 256 + topics.count * 224 + messages.count * 48 + bytes)
        arguments.append(topics.count * 4)
        for topic in topics { keys.appendTopicKeys(topic.name, to: &arguments) }
        arguments.append(history.maxEntries)
        arguments.append(history.maxAgeMilliseconds)
        arguments.append(history.topicKeysMilliseconds)
        arguments.append(keys.channel)
        arguments.append(nodeChannel)
        arguments.append(keys.life)
        for (slot, topic) in topics.enumerated() {
            arguments.append(ClusterKeys.topicNoticePrefix, topic.name)
            arguments.append(freshEpoch())
            let read = known(slot)
            arguments.append(read?.epoch ?? "")
            arguments.append(read?.number ?? 0)
            arguments.append(renew(slot) ? 1 : 0)
            arguments.append(topic.indexes.count)
            for index in topic.indexes {
                arguments.append(messages[index].data)
                arguments.append(messages[index].publishedAt)
            }
        }
        return arguments
    }

    /// The script's answer, first seq, epoch, last entry ID and the entry ID before them for each
    /// topic in `topics`' order, in one flat array; nil when it is anything else.
    func numbered(_ reply: RedisReply) -> [Numbered]? {
        guard let parts = reply.elements, parts.count == topics.count * 4 else { return nil }
        var numbered: [Numbered] = []
        numbered.reserveCapacity(topics.count)
        var index = 0
        while index < parts.count {
            guard let first = parts[index].integer, first > 0, let epoch = parts[index + 1].text, !epoch.isEmpty,
                let lastID = parts[index + 2].text, let previousID = parts[index + 3].text
            else { return nil }
            numbered.append(Numbered(first: UInt64(first), epoch: epoch, lastID: lastID, previousID: previousID))
            index += 4
        }
        return numbered
    }
}
