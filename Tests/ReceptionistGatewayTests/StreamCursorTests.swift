@testable import ReceptionistGateway
import ReceptionistWire
import ReceptionistTestSupport
import Testing

@Suite struct StreamCursorTests {
    @Test func consecutiveNumbersAreNextAndRereadsAreDuplicates() {
        var cursor = StreamCursor()
        #expect(cursor.accept(id: "1-0", number: 1) == .next)
        #expect(cursor.accept(id: "2-0", number: 2) == .next)
        #expect(cursor.lastID == "2-0" && cursor.lastNumber == 2)
        var reread = StreamCursor(lastID: "2-0", lastNumber: 2)
        #expect(reread.accept(id: "2-0", number: 2) == .duplicate)
        #expect(reread.accept(id: "3-0", number: 3) == .next)
    }

    @Test func trimmedNumbersAreAGapAndTheCursorMovesPastThem() {
        var cursor = StreamCursor(lastID: "5-0", lastNumber: 5)
        #expect(cursor.accept(id: "9-0", number: 9) == .gap(from: 6, to: 8))
        #expect(cursor.accept(id: "10-0", number: 10) == .next)
    }

    @Test func numbersGoingBackMeanRedisStartedAgain() {
        var cursor = StreamCursor(lastID: "5-0", lastNumber: 50)
        #expect(cursor.accept(id: "6-0", number: 1) == .regressed)
        #expect(cursor.accept(id: "7-0", number: 2) == .next)
    }

    @Test func anEntryAtOrBeforeTheLastOneReadIsADuplicate() {
        // The node mirrored its own message 100 (ID 9-0) from Redis's answer; a read sent before
        // that returns 61 onwards again: had already, not numbering that went back.
        var cursor = StreamCursor(lastID: "9-0", lastNumber: 100)
        #expect(cursor.accept(id: "5-3", number: 61) == .duplicate)
        #expect(cursor.accept(id: "9-0", number: 100) == .duplicate)
        #expect(cursor.lastNumber == 100 && cursor.lastID == "9-0")
        #expect(cursor.accept(id: "10-0", number: 101) == .next)
        #expect(StreamCursor.order("12-7")! > StreamCursor.order("9-99")!)
    }

    @Test func theIDBeforeAnEntryReadsThatEntryNext() {
        #expect(StreamCursor.before("17-3") == "17-2")
        #expect(StreamCursor.before("17-0") == "16-18446744073709551615")
        #expect(StreamCursor.before("0-0") == nil)
        #expect(StreamCursor.before("x") == nil)
        var cursor = StreamCursor(lastID: StreamCursor.before("17-0")!, lastNumber: 4)
        #expect(cursor.accept(id: "17-0", number: 5) == .next)
    }

    @Test func noticesRoundTrip() {
        for notice: ClusterKeys.Notice in [
            .storeCreated("a"), .storeChanged("b.c"), .topicPublished("news-1"), .topicPublished("news-1", seq: 42, epoch: "5c1e"),
            .topicPublished("news-1", seq: 42, epoch: "5c1e", id: "1700000000000-3"),
            .presenceChanged(.topic("chat"), node: "00aa"), .presenceChanged(.store("tiles"), node: "ff01"),
            .storeDeleted("orders", epoch: "5c1e"), .storeDeleted("old", epoch: ""),
        ] {
            #expect(ClusterKeys.decode(Array(ClusterKeys.encode(notice).utf8)) == notice)
        }
        // As the publish script sends it: the name's notice with the number and epoch appended.
        #expect(ClusterKeys.decode(Array("t:a.b-c:7:00ff".utf8)) == .topicPublished("a.b-c", seq: 7, epoch: "00ff"))
        #expect(ClusterKeys.decode(Array("t:a:x:00ff".utf8)) == .topicPublished("a:x:00ff"), "not a number: taken whole as a name, which no topic has")
        // With the entry ID, as this version's script sends it; a node of an earlier version sent none.
        #expect(ClusterKeys.decode(Array("t:a:7:00ff:17-2".utf8)) == .topicPublished("a", seq: 7, epoch: "00ff", id: "17-2"))
        #expect(ClusterKeys.decode(Array("t:a:7:00ff:17".utf8)) == .topicPublished("a:7:00ff:17"), "not an entry ID")
        #expect(ClusterKeys.decode(Array("t:a:7::17-2".utf8)) == .topicPublished("a:7::17-2"), "no epoch")
        // As the deletion script sends it: the notice without an epoch, and the epoch appended.
        #expect(ClusterKeys.decode(Array((ClusterKeys.encode(.storeDeleted("orders", epoch: "")) + "00ff").utf8))
            == .storeDeleted("orders", epoch: "00ff"))
        #expect(ClusterKeys.decode(Array("d:orders".utf8)) == nil, "no epoch: not a deletion any node could match")
        #expect(ClusterKeys.decode(Array("x:y".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("s:".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("p:00aa:x:chat".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("p::t:chat".utf8)) == nil)
    }

    /// A notice that carries its call's messages (`m:`, as the publish script writes it) is read
    /// whole, data with colons and all; one whose messages cannot be read whole is the bare notice
    /// of its last number, so the node reads the log; one whose head cannot be read is nobody's.
    @Test func aNoticeCarryingItsMessagesIsReadWholeOrTakenForTheBareNotice() {
        let messages = [
            PublishBatch.Message(topic: "news", data: Array(#"{"a":"x:y"}"#.utf8), publishedAt: 1_700_000_000_000_001),
            PublishBatch.Message(topic: "news", data: Array("7".utf8), publishedAt: 1_700_000_000_000_002),
            PublishBatch.Message(topic: "news", data: Array(#""::""#.utf8), publishedAt: 3),
        ]
        let carried = ClusterKeys.Notice.topicCarried(
            "news", messages: messages, numbered: PublishBatch.Numbered(first: 40, epoch: "5c1e", lastID: "1700000000000-2"))
        let text = ClusterKeys.encode(carried)
        #expect(text == #"m:news:42:5c1e:1700000000000-2:3:1700000000000001:11:{"a":"x:y"}:1700000000000002:1:7:3:4:"::""#)
        #expect(ClusterKeys.decode(Array(text.utf8)) == carried)
        // This version's script ends it with the ID of the entry before the messages.
        let after = ClusterKeys.Notice.topicCarried(
            "news", messages: messages,
            numbered: PublishBatch.Numbered(first: 40, epoch: "5c1e", lastID: "1700000000000-2", previousID: "1699999999999-7"))
        #expect(ClusterKeys.encode(after) == text + ":1699999999999-7")
        #expect(ClusterKeys.decode(Array(ClusterKeys.encode(after).utf8)) == after)
        let bare = ClusterKeys.Notice.topicPublished("news", seq: 42, epoch: "5c1e", id: "1700000000000-2")
        for broken in [
            String(text.dropLast()),  // the last message is short
            text + "x",  // bytes after the last message
            text.replacingOccurrences(of: ":3:1700", with: ":4:1700"),  // one message more than it holds
            text.replacingOccurrences(of: ":11:", with: ":99:"),  // a length past the end
            text.replacingOccurrences(of: ":11:", with: ":1x:"),  // a length that is not a number
            text + ":17",  // an entry ID before them that is not one
            text + ":",
        ] {
            #expect(ClusterKeys.decode(Array(broken.utf8)) == bare, "\(broken)")
        }
        for unreadable in [
            "m:news:42:5c1e:1700000000000-2", "m::42:5c1e:1-2:1:1:1:7", "m:news:x:5c1e:1-2:1:1:1:7",
            "m:news:42::1-2:1:1:1:7", "m:news:42:5c1e:12:1:1:1:7", "m:news:42:5c1e:1-2:0:", "m:news:2:5c1e:1-2:3:1:1:7",
        ] {
            #expect(ClusterKeys.decode(Array(unreadable.utf8)) == nil, "\(unreadable)")
        }
        #expect(ClusterKeys(database: 0).nodeChannel("00ff") == "rcpt:events:0:m:00ff")
    }

    /// A carried notice cut, padded or changed anywhere, byte by byte, is never misread: whatever
    /// is still taken for a carried notice is exactly what its parts encode to, so no message's
    /// bytes, number or time were taken from the wrong place. 20,000 seeded changes, each of one
    /// to three bytes, made of the bytes a notice is made of (numbers with a leading zero aside).
    @Test func aCarriedNoticeChangedAnywhereIsReadExactlyOrNotAtAll() {
        let messages = [
            PublishBatch.Message(topic: "news", data: Array(#"{"a":"x:1-2"}"#.utf8), publishedAt: 1_700_000_000_000_001),
            PublishBatch.Message(topic: "news", data: Array("12".utf8), publishedAt: 9),
        ]
        let valid = Array(ClusterKeys.encode(.topicCarried(
            "news", messages: messages,
            numbered: PublishBatch.Numbered(first: 41, epoch: "5c1e", lastID: "1700000000000-2", previousID: "1700000000000-1"))).utf8)
        let alphabet = Array(":0123456789-am{}\"x".utf8)
        var random = SeededGenerator(state: 37)
        var carried = 0
        for _ in 0..<20_000 {
            var bytes = valid
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes[at] = alphabet.randomElement(using: &random)!
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
                default: bytes.removeLast(Int.random(in: 0...min(8, bytes.count - 1), using: &random))
                }
                if bytes.isEmpty { break }
            }
            // A number written with a leading zero reads as itself, and is encoded without it.
            let zero = UInt8(ascii: "0")
            if bytes.indices.dropLast().contains(where: {
                (bytes[$0] == UInt8(ascii: ":") || bytes[$0] == UInt8(ascii: "-")) && bytes[$0 + 1] == zero
                    && $0 + 2 < bytes.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[$0 + 2])
            }) { continue }
            guard case .topicCarried(let name, let messages, let numbered)? = ClusterKeys.decode(bytes) else { continue }
            carried += 1
            let again = Array(ClusterKeys.encode(.topicCarried(name, messages: messages, numbered: numbered)).utf8)
            #expect(again == bytes, "\(String(decoding: bytes, as: UTF8.self))")
        }
        // Some changes (a digit of a time, a byte of data) leave a notice that still reads.
        #expect(carried > 100)
    }

    @Test func aStoresKeysShareOneHashTag() {
        let keys = ClusterKeys(database: 2)
        for key in [keys.storeVersion("tiles"), keys.storeModels("tiles"), keys.storeLog("tiles")] {
            #expect(key.contains("{tiles}"))
        }
        #expect(keys.channel == "rcpt:events:2")
    }
}
