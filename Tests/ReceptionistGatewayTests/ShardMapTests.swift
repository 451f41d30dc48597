@testable import ReceptionistGateway
import Testing

@Suite struct ShardMapTests {
    private let names = (0..<10_000).map { "topic-\($0)" }

    @Test func fnv1aMatchesTheReferenceValues() {
        // FNV-1a 64 test vectors (the empty string is the offset basis).
        #expect(ShardMap.fnv1a("") == 0xCBF2_9CE4_8422_2325)
        #expect(ShardMap.fnv1a("a") == 0xAF63_DC4C_8601_EC8C)
        #expect(ShardMap.fnv1a("foobar") == 0x85944171F73967E8)
    }

    @Test func jumpHashStaysInRangeAndIsStable() {
        #expect((0..<1000).allSatisfy { ShardMap.jump(UInt64($0), buckets: 1) == 0 })
        #expect((0..<1000).allSatisfy { (0..<7).contains(ShardMap.jump(UInt64($0) &* 0x9E37_79B9_7F4A_7C15, buckets: 7)) })
        // The same name lands on the same server in every process: the hash is not randomised.
        #expect(ShardMap.index(of: "news", shards: 2) == ShardMap.jump(ShardMap.fnv1a("news"), buckets: 2))
    }

    @Test func oneServerHoldsEverything() {
        #expect(names.allSatisfy { ShardMap.index(of: $0, shards: 1) == 0 })
    }

    @Test(arguments: [2, 3, 5])
    func namesSpreadEvenly(shards: Int) {
        var counts = Array(repeating: 0, count: shards)
        for name in names { counts[ShardMap.index(of: name, shards: shards)] += 1 }
        let expected = names.count / shards
        #expect(counts.allSatisfy { abs($0 - expected) < expected / 10 }, "\(counts)")
    }

    @Test(arguments: [1, 2, 4])
    func addingAServerMovesOnlyWhatGoesToIt(shards: Int) {
        var moved = 0
        for name in names {
            let before = ShardMap.index(of: name, shards: shards), after = ShardMap.index(of: name, shards: shards + 1)
            if before != after {
                moved += 1
                #expect(after == shards, "\(name) moved between old servers")
            }
        }
        // About 1 in shards + 1 moves.
        let expected = names.count / (shards + 1)
        #expect(abs(moved - expected) < expected / 5, "moved \(moved), expected about \(expected)")
    }
}
