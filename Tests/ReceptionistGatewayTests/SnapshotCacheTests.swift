@testable import ReceptionistGateway
import Testing

@Suite struct SnapshotCacheTests {
    private func bytes(_ count: Int) -> () -> [UInt8] { { [UInt8](repeating: 0x20, count: count) } }

    @Test func readersOfOneVersionShareItsBytesAndAnotherVersionOrLifeIsBuiltAgain() {
        let cache = SnapshotCache()
        let first = cache.body(store: "s", epoch: "e1", version: 3, build: bytes(100_000))
        #expect(cache.body(store: "s", epoch: "e1", version: 3, build: { Issue.record("built again"); return [] }) === first)
        #expect(cache.body(store: "s", epoch: "e1", version: 4, build: bytes(100_000)) !== first)
        #expect(cache.body(store: "s", epoch: "e2", version: 4, build: bytes(100_000)).count == 100_000)
        let small = cache.body(store: "t", epoch: "e", version: 1, build: bytes(10))
        #expect(cache.body(store: "t", epoch: "e", version: 1, build: bytes(10)) !== small, "a small answer is not kept")
    }

    @Test func whatIsKeptIsBoundedAndADeletedStoreGoes() {
        let cache = SnapshotCache()
        let quarter = SnapshotCache.maxBytes / 4
        for n in 0..<6 { _ = cache.body(store: "s\(n)", epoch: "e", version: 1, build: bytes(quarter)) }
        // At most maxBytes kept: the oldest of six quarters went, the newest stayed.
        var rebuilt: [Int] = []
        for n in [5, 0] {
            _ = cache.body(store: "s\(n)", epoch: "e", version: 1, build: { rebuilt.append(n); return [UInt8](repeating: 0, count: quarter) })
        }
        #expect(rebuilt == [0])
        let kept = cache.body(store: "x", epoch: "e", version: 1, build: bytes(100_000))
        cache.forget(store: "x")
        #expect(cache.body(store: "x", epoch: "e", version: 1, build: bytes(100_000)) !== kept, "a deleted store's bytes went")
    }
}
