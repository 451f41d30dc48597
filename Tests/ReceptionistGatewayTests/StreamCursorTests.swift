@testable import ReceptionistGateway
import ReceptionistWire
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

    @Test func noticesRoundTrip() {
        for notice: ClusterKeys.Notice in [
            .storeCreated("a"), .storeChanged("b.c"), .topicPublished("news-1"), .topicPublished("news-1", seq: 42, epoch: "5c1e"),
            .presenceChanged(.topic("chat"), node: "00aa"), .presenceChanged(.store("tiles"), node: "ff01"),
            .storeDeleted("orders", epoch: "5c1e"), .storeDeleted("old", epoch: ""),
        ] {
            #expect(ClusterKeys.decode(Array(ClusterKeys.encode(notice).utf8)) == notice)
        }
        // As the publish script sends it: the name's notice with the number and epoch appended.
        #expect(ClusterKeys.decode(Array("t:a.b-c:7:00ff".utf8)) == .topicPublished("a.b-c", seq: 7, epoch: "00ff"))
        #expect(ClusterKeys.decode(Array("t:a:x:00ff".utf8)) == .topicPublished("a:x:00ff"), "not a number: taken whole as a name, which no topic has")
        // As the deletion script sends it: the notice without an epoch, and the epoch appended.
        #expect(ClusterKeys.decode(Array((ClusterKeys.encode(.storeDeleted("orders", epoch: "")) + "00ff").utf8))
            == .storeDeleted("orders", epoch: "00ff"))
        #expect(ClusterKeys.decode(Array("d:orders".utf8)) == nil, "no epoch: not a deletion any node could match")
        #expect(ClusterKeys.decode(Array("x:y".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("s:".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("p:00aa:x:chat".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("p::t:chat".utf8)) == nil)
    }

    @Test func aStoresKeysShareOneHashTag() {
        let keys = ClusterKeys(database: 2)
        for key in [keys.storeVersion("tiles"), keys.storeModels("tiles"), keys.storeLog("tiles")] {
            #expect(key.contains("{tiles}"))
        }
        #expect(keys.channel == "rcpt:events:2")
    }
}
