@testable import ReceptionistGateway
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

    @Test func noticesRoundTrip() {
        for notice: ClusterKeys.Notice in [.storeCreated("a"), .storeChanged("b.c"), .topicPublished("news-1")] {
            #expect(ClusterKeys.decode(Array(ClusterKeys.encode(notice).utf8)) == notice)
        }
        #expect(ClusterKeys.decode(Array("x:y".utf8)) == nil)
        #expect(ClusterKeys.decode(Array("s:".utf8)) == nil)
    }

    @Test func aStoresKeysShareOneHashTag() {
        let keys = ClusterKeys(database: 2)
        for key in [keys.storeVersion("tiles"), keys.storeModels("tiles"), keys.storeLog("tiles")] {
            #expect(key.contains("{tiles}"))
        }
        #expect(keys.channel == "rcpt:events:2")
    }
}
