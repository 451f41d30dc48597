import Glibc
@testable import ReceptionistDisk
import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistSync
import Testing

/// The disk engine's queue and its writer held back: a full queue refuses at once, an observer
/// that blocks holds the writer back only so far, and close waits only until its time-out.
@Suite struct DiskEngineQueueTests {
    @Test func aFullQueueRefusesATopicMessageAtOnceAndTakesItAgainOnceDrained() throws {
        let (engine, _) = try DiskEngine.open(DiskOptions(directory: temporaryDirectory(), maxQueued: 4))
        defer { engine.close() }
        engine.holdWriter(true)
        let stored = PThreadLock(0)
        for seq in 1...4 {
            #expect(engine.appendMessage(topic: "t", epoch: "e", seq: UInt64(seq), publishedAt: 1, data: Array("1".utf8)) { error in
                if error == nil { stored.withLock { $0 += 1 } }
            })
        }
        // The fifth waits for nobody: refused, and the loop that asked goes on.
        #expect(!engine.appendMessage(topic: "t", epoch: "e", seq: 5, publishedAt: 1, data: Array("1".utf8)) { _ in })
        engine.holdWriter(false)
        for _ in 0..<1000 where stored.withLock({ $0 }) < 4 { usleep(1000) }
        #expect(stored.withLock { $0 } == 4)
        #expect(append(engine, "t", seq: 5) == .stored)
    }

    /// Topic messages waiting for the writer are bounded by their bytes too: with the writer held,
    /// the message past the bound is refused at once, and taken again once the queue drained; a
    /// message bigger than the bound alone is taken into an empty queue.
    @Test func queuedMessagesAreBoundedByTheirBytes() throws {
        var options = DiskOptions(directory: temporaryDirectory())
        options.maxQueuedMessageBytes = 3000
        let (engine, _) = try DiskEngine.open(options)
        defer { engine.close() }
        let data = Array(repeating: UInt8(ascii: "1"), count: 1000)
        engine.holdWriter(true)
        let stored = PThreadLock(0)
        for seq in 1...3 {
            #expect(engine.appendMessage(topic: "t", epoch: "e", seq: UInt64(seq), publishedAt: 1, data: data) { error in
                if error == nil { stored.withLock { $0 += 1 } }
            })
        }
        #expect(!engine.appendMessage(topic: "t", epoch: "e", seq: 4, publishedAt: 1, data: data) { _ in })
        engine.holdWriter(false)
        for _ in 0..<1000 where stored.withLock({ $0 }) < 3 { usleep(1000) }
        #expect(stored.withLock { $0 } == 3)
        engine.holdWriter(true)
        let big = Array(repeating: UInt8(ascii: "2"), count: 5000)
        #expect(engine.appendMessage(topic: "t", epoch: "e", seq: 4, publishedAt: 1, data: big) { error in
            if error == nil { stored.withLock { $0 += 1 } }
        })
        #expect(!engine.appendMessage(topic: "t", epoch: "e", seq: 5, publishedAt: 1, data: Array("5".utf8)) { _ in })
        engine.holdWriter(false)
        for _ in 0..<1000 where stored.withLock({ $0 }) < 4 { usleep(1000) }
        #expect(append(engine, "t", seq: 5) == .stored)
    }

    @Test func aBlockedObserverHoldsTheWriterBackPastTheUnsettledBatches() throws {
        var options = DiskOptions(directory: temporaryDirectory())
        options.maxUnsettledBatches = 2
        let (engine, _) = try DiskEngine.open(options)
        defer { engine.close() }
        let store = try StoreRegistry(journal: engine).create("s")
        // The observer blocks on its first change set until the gate opens.
        let (gate, entered, token) = blockingObserver(of: store)
        defer { token.cancel() }
        let answered = PThreadLock(0)
        func commit(_ n: Int) {
            store.commit([.put(model: "m\(n)", value: [:])]) { _ in answered.withLock { $0 += 1 } }
        }
        // The store's creation was a batch of its own, settled at once; it is answered before
        // its sync is counted, so the count is read once it has it.
        for _ in 0..<1000 where engine.syncs.load(ordering: .relaxed) < 1 { usleep(1000) }
        let base = engine.syncs.load(ordering: .relaxed)
        #expect(base == 1)
        func syncs() -> UInt64 { engine.syncs.load(ordering: .relaxed) - base }
        commit(1)
        #expect(entered.wait(seconds: 10, until: { $0 }, then: { value, _ in value }), "the observer never ran")
        // The notifier is stuck in the first batch's settle: one more batch is stored, then none.
        commit(2)
        for _ in 0..<1000 where syncs() < 2 { usleep(1000) }
        #expect(syncs() == 2)
        commit(3)
        usleep(200_000)
        #expect(syncs() == 2, "the writer stored a third batch while two waited for a blocked observer")
        gate.withLock { $0 = true }
        gate.broadcast()
        for _ in 0..<5000 where answered.withLock({ $0 }) < 3 { usleep(1000) }
        #expect(answered.withLock { $0 } == 3)
        #expect(syncs() == 3)
        #expect(store.version == 3)
    }

    @Test func closeWaitsForAWriterHeldBackOnlyUntilItsTimeOut() throws {
        var options = DiskOptions(directory: temporaryDirectory())
        options.maxUnsettledBatches = 1
        let (engine, _) = try DiskEngine.open(options)
        let store = try StoreRegistry(journal: engine).create("s")
        let (gate, entered, token) = blockingObserver(of: store)
        defer { token.cancel() }
        store.commit([.put(model: "a", value: [:])]) { _ in }
        #expect(entered.wait(seconds: 10, until: { $0 }, then: { value, _ in value }), "the observer never ran")
        store.commit([.put(model: "b", value: [:])]) { _ in }
        store.commit([.put(model: "c", value: [:])]) { _ in }
        // The writer waits for the blocked observer: close gives up at its time-out.
        let started = Clock.monotonicSeconds()
        #expect(!engine.close(timeoutSeconds: 0.3))
        let waited = Clock.monotonicSeconds() - started
        #expect(waited >= 0.3 && waited < 5, "close waited \(waited) s")
        // Once the observer lets go, the writer ends, and close releases the directory.
        gate.withLock { $0 = true }
        gate.broadcast()
        #expect(engine.close(timeoutSeconds: 10))
    }
}
