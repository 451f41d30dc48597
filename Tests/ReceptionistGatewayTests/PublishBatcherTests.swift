@testable import ReceptionistGateway
import ReceptionistLoop
import ReceptionistTestSupport
import Synchronization
import Testing

@Suite struct PublishBatcherTests {
    /// Runs `body` once on a loop, with a batcher that logs each batch it sends ("sent <count>")
    /// and each early write ("flushed"); the loop stops when a batch of `lastCount` is sent.
    private func events(lastCount: Int, _ body: @escaping @Sendable (PublishBatcher, (String) -> Void) -> Void) -> [String] {
        let log = Mutex<[String]>([])
        let thread = LoopThread { loop in
            var timer: LoopTimer?
            var batcher: PublishBatcher?
            batcher = PublishBatcher(loop: loop, flushNow: { log.withLock { $0.append("flushed") } }) { batch, waiters in
                #expect(waiters.count == batch.messages.count)
                log.withLock { $0.append("sent \(batch.messages.count)") }
                if batch.messages.count == lastCount {
                    timer?.close()
                    timer = nil
                    batcher = nil
                    loop.mailbox.shutDown()
                }
            }
            timer = LoopTimer(loop: loop) {
                guard let batcher else { return }
                body(batcher) { note in log.withLock { $0.append(note) } }
            }
            timer?.start(delayMilliseconds: 1)
        }
        #expect(thread.waitUntilStopped(seconds: 10))
        return log.withLock { $0 }
    }

    private func message(_ bytes: Int) -> PublishBatch.Message {
        PublishBatch.Message(topic: "t", data: [UInt8](repeating: 0x31, count: bytes), publishedAt: 1)
    }

    /// A full batch is sent and written to Redis while the iteration goes on; what is left waits
    /// for the iteration's end.
    @Test(.timeLimit(.minutes(10)))
    func aFullBatchLeavesAtOnceAndTheRestAtTheIterationsEnd() {
        let log = events(lastCount: 5) { batcher, note in
            for _ in 0..<PublishBatch.maxMessages + 5 { batcher.add(message(1), .init { _ in }) }
            note("added")
        }
        #expect(log == ["sent \(PublishBatch.maxMessages)", "flushed", "added", "sent 5"])
    }

    /// A message that does not fit the batch's bytes sends the batch first, so no more than one
    /// batch ever waits.
    @Test(.timeLimit(.minutes(10)))
    func aMessageThatDoesNotFitSendsTheBatchBeforeIt() {
        let log = events(lastCount: 2) { batcher, note in
            batcher.add(message(PublishBatch.maxBytes - 10), .init { _ in })
            note("added one")
            batcher.add(message(11), .init { _ in })
            batcher.add(message(1), .init { _ in })
            note("added three")
        }
        #expect(log == ["added one", "sent 1", "flushed", "added three", "sent 2"])
    }
}
