@testable import ReceptionistGateway
import ReceptionistLoop
import Testing

@Suite struct PublishBatchTests {
    private func message(_ topic: String, _ text: String, at time: UInt64 = 7) -> PublishBatch.Message {
        PublishBatch.Message(topic: topic, data: Array(text.utf8), publishedAt: time)
    }

    @Test func topicsKeepTheirFirstOrderAndEachTopicItsMessagesOrder() {
        var batch = PublishBatch()
        // Runs of one topic and switches between topics, each way.
        let published = [("b", "1"), ("b", "2"), ("a", "3"), ("b", "4"), ("a", "5"), ("a", "6"), ("c", "7"), ("b", "8")]
        for (topic, text) in published {
            batch.append(message(topic, text))
        }
        #expect(batch.topics.map(\.name) == ["b", "a", "c"])
        #expect(batch.topics.map(\.indexes) == [[0, 1, 3, 7], [2, 4, 5], [6]])
    }

    @Test func theScriptIsGivenEachTopicsKeysThenItsMessagesInOrder() {
        var batch = PublishBatch()
        batch.append(message("news", "{\"n\":1}", at: 10))
        batch.append(message("chat", "{\"n\":2}", at: 11))
        batch.append(message("news", "{\"n\":3}", at: 12))
        let keys = ClusterKeys(database: 0)
        var epochs = 0
        let arguments = batch.arguments(
            keys: keys, nodeChannel: keys.nodeChannel("n1"), history: RedisHistory(maxEntries: 500, maxAgeSeconds: 2, topicKeysSeconds: 60),
            known: { $0 == 0 ? PublishBatch.Known(epoch: "e7", number: 41) : nil }, renew: { $0 == 1 }
        ) {
            epochs += 1
            return "fresh\(epochs)"
        }
        #expect(arguments == RedisArguments([
            "8",
            keys.topicSeq("news"), keys.topicLog("news"), keys.topicEpoch("news"), keys.topicLast("news"),
            keys.topicSeq("chat"), keys.topicLog("chat"), keys.topicEpoch("chat"), keys.topicLast("chat"),
            "500", "2000", "60000", keys.channel, keys.nodeChannel("n1"), keys.life,
            "t:news", "fresh1", "e7", "41", "0", "2", "{\"n\":1}", "10", "{\"n\":3}", "12",
            "t:chat", "fresh2", "", "0", "1", "1", "{\"n\":2}", "11",
        ].map { Array($0.utf8) }))
    }

    @Test func aBatchIsBoundedByMessagesAndBytesButAlwaysTakesItsFirst() {
        var batch = PublishBatch()
        #expect(batch.fits(PublishBatch.maxBytes + 1), "an empty batch takes any one message")
        batch.append(message("t", String(repeating: "x", count: PublishBatch.maxBytes - 10)))
        #expect(batch.fits(10))
        #expect(!batch.fits(11))

        var many = PublishBatch()
        for n in 0..<PublishBatch.maxMessages {
            #expect(many.fits(1))
            many.append(message("t", "\(n)"))
        }
        #expect(!many.fits(1))
        #expect(many.isFull)

        var bytes = PublishBatch()
        bytes.append(message("t", String(repeating: "x", count: PublishBatch.maxBytes - 1)))
        #expect(!bytes.isFull)
        bytes.append(message("t", "x"))
        #expect(bytes.isFull, "a batch of maxBytes is full")
    }

    @Test func theAnswerIsReadPerTopicAndAnythingElseIsRefused() {
        var batch = PublishBatch()
        batch.append(message("a", "1"))
        batch.append(message("b", "2"))
        let answer = RedisReply.array([
            .integer(41), .string(Array("e1".utf8)), .string(Array("5-0".utf8)), .string(Array("4-0".utf8)),
            .integer(1), .string(Array("e2".utf8)), .string(Array("6-1".utf8)), .string(Array("0-0".utf8)),
        ])
        #expect(batch.numbered(answer) == [
            PublishBatch.Numbered(first: 41, epoch: "e1", lastID: "5-0", previousID: "4-0"),
            PublishBatch.Numbered(first: 1, epoch: "e2", lastID: "6-1", previousID: "0-0"),
        ])
        #expect(batch.numbered(.array(Array(answer.elements![0..<4]))) == nil, "one topic short")
        #expect(batch.numbered(.array(Array(answer.elements![0..<7]))) == nil, "one field short")
        let id = RedisReply.string(Array("0-0".utf8))
        #expect(batch.numbered(.array([
            .integer(0), .string(Array("e1".utf8)), .string(Array("5-0".utf8)), id,
            .integer(1), .string(Array("e2".utf8)), .string(Array("6-1".utf8)), id,
        ])) == nil, "no message is numbered 0")
        #expect(batch.numbered(.array([
            .integer(41), .string(Array("".utf8)), .string(Array("5-0".utf8)), id,
            .integer(1), .string(Array("e2".utf8)), .string(Array("6-1".utf8)), id,
        ])) == nil, "an epoch is never empty")
        #expect(batch.numbered(.array([
            .array([.integer(41), .string(Array("e1".utf8)), .string(Array("5-0".utf8)), id]),
            .array([.integer(1), .string(Array("e2".utf8)), .string(Array("6-1".utf8)), id]),
        ])) == nil, "the answer is flat")
        #expect(batch.numbered(.integer(1)) == nil)
        #expect(batch.numbered(.error("ERR")) == nil)
    }
}
