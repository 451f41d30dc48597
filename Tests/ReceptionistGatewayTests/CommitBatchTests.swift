@testable import ReceptionistGateway
import ReceptionistLoop
import Testing

@Suite struct CommitBatchTests {
    private func commit(_ store: String, at version: UInt64, _ entry: String, _ models: [(String, String)] = []) -> CommitBatch.Commit {
        CommitBatch.Commit(
            store: store, expectedVersion: version, epoch: "e-\(store)", entry: Array(entry.utf8),
            models: models.map { (id: $0.0, json: Array($0.1.utf8)) })
    }

    @Test func theScriptIsGivenEachCommitsKeysThenEachCommitInOrder() {
        var batch = CommitBatch()
        batch.append(commit("b", at: 7, "{\"v\":8}", [("m1", "{\"n\":1}"), ("m2", "")]))
        batch.append(commit("a", at: 0, "{\"v\":1}"))
        batch.append(commit("b", at: 7, "{\"v\":8,\"again\":true}", [("m3", "3")]))
        let keys = ClusterKeys(database: 0)
        let arguments = batch.arguments(keys: keys, history: RedisHistory(maxEntries: 500, maxAgeSeconds: 2))
        #expect(arguments == RedisArguments([
            "12",
            keys.storeVersion("b"), keys.storeModels("b"), keys.storeLog("b"), keys.storeEpoch("b"),
            keys.storeVersion("a"), keys.storeModels("a"), keys.storeLog("a"), keys.storeEpoch("a"),
            keys.storeVersion("b"), keys.storeModels("b"), keys.storeLog("b"), keys.storeEpoch("b"),
            "500", keys.channel, "2000", keys.life,
            "7", "e-b", "{\"v\":8}", "s:b", "2", "m1", "{\"n\":1}", "m2", "",
            "0", "e-a", "{\"v\":1}", "s:a", "0",
            "7", "e-b", "{\"v\":8,\"again\":true}", "s:b", "1", "m3", "3",
        ].map { Array($0.utf8) }))
    }

    @Test func aBatchIsBoundedByCommitsAndBytesButAlwaysTakesItsFirst() {
        var batch = CommitBatch()
        let big = commit("s", at: 0, String(repeating: "x", count: CommitBatch.maxBytes + 1))
        #expect(batch.fits(big), "an empty batch takes any one commit")
        batch.append(commit("s", at: 0, String(repeating: "x", count: CommitBatch.maxBytes - 10)))
        #expect(batch.fits(commit("s", at: 1, "12345", [("id", "678")])), "its entry and models' ids and JSON count")
        #expect(!batch.fits(commit("s", at: 1, "12345", [("id", "6789")])))

        var many = CommitBatch()
        for n in 0..<CommitBatch.maxCommits {
            #expect(many.fits(commit("s\(n)", at: 0, "{}")))
            many.append(commit("s\(n)", at: 0, "{}"))
        }
        #expect(!many.fits(commit("t", at: 0, "{}")))
        #expect(many.isFull)

        var bytes = CommitBatch()
        bytes.append(commit("s", at: 0, String(repeating: "x", count: CommitBatch.maxBytes - 1)))
        #expect(!bytes.isFull)
        bytes.append(commit("t", at: 0, "x"))
        #expect(bytes.isFull, "a batch of maxBytes is full")
    }

    @Test func theAnswerIsReadPerCommitAndAnythingElseIsRefused() {
        var batch = CommitBatch()
        batch.append(commit("a", at: 4, "{}"))
        batch.append(commit("b", at: 2, "{}"))
        batch.append(commit("c", at: 0, "{}"))
        let answer = RedisReply.array([.integer(1), .integer(5), .integer(0), .integer(9), .integer(-1), .integer(0)])
        #expect(batch.outcomes(answer) == [.committed(5), .moved(9), .noSuchStore])
        var one = CommitBatch()
        one.append(commit("d", at: 3, "{}"))
        #expect(one.outcomes(.array([.integer(-2), .integer(1)])) == [.otherEpoch(1)], "a store made again since")
        #expect(batch.outcomes(.array(Array(answer.elements![0..<4]))) == nil, "one commit short")
        #expect(batch.outcomes(.array(Array(answer.elements![0..<5]))) == nil, "one number short")
        #expect(batch.outcomes(.array([.integer(2), .integer(5), .integer(0), .integer(9), .integer(-1), .integer(0)])) == nil,
                "an unknown code")
        #expect(batch.outcomes(.array([.integer(1), .integer(-5), .integer(0), .integer(9), .integer(-1), .integer(0)])) == nil,
                "a version is never negative")
        #expect(batch.outcomes(.array([.integer(1), .string(Array("v5".utf8)), .integer(0), .integer(9), .integer(-1), .integer(0)])) == nil,
                "versions are numbers")
        #expect(batch.outcomes(.integer(1)) == nil)
        #expect(batch.outcomes(.error("ERR")) == nil)
    }
}
