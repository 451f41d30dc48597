import ReceptionistModel
import ReceptionistSync
import Testing

@Suite struct SerialWorkerTests {
    /// The bound: while the thread is held up, at most `maxQueued` closures wait; the rest are
    /// refused at once rather than queued without end.
    @Test func pastItsBoundWorkIsRefusedAndWhatWasAcceptedRunsInOrder() {
        let worker = SerialWorker(maxQueued: 3)
        let gate = ConditionLock((open: false, started: false))
        let ran = ConditionLock<[Int]>([])
        #expect(worker.enqueue {
            gate.withLock { $0.started = true }
            gate.broadcast()
            gate.wait(until: { $0.open }, then: { _ in })
        })
        // Wait for the thread to hold the first closure, so the queue is empty again.
        gate.wait(until: { $0.started }, then: { _ in })
        for n in 1...3 {
            #expect(worker.enqueue {
                ran.withLock { $0.append(n) }
                ran.broadcast()
            })
        }
        #expect(worker.queuedCount == 3)
        #expect(!worker.enqueue { ran.withLock { $0.append(99) } }, "a fourth closure must be refused")
        gate.withLock { $0.open = true }
        gate.broadcast()
        let order = ran.wait(seconds: 10, until: { $0.count == 3 }, then: { value, _ in value })
        #expect(order == [1, 2, 3])
        worker.stop()
    }
}
