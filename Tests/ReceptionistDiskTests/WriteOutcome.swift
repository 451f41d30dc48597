@testable import ReceptionistDisk
@testable import ReceptionistModel
import ReceptionistSync

/// How a write handed to the disk engine was answered. A refusal and a missing answer are told
/// apart: a test that expects a refusal fails on a time-out.
enum WriteOutcome: Equatable {
    /// Stored (a store's committer: stored and settled).
    case stored
    /// The writer (or the store, for a committer) answered with this error.
    case refused(StoreError)
    /// The engine's queue did not take it: nobody will answer.
    case notQueued
    /// No answer within the wait.
    case timedOut
}

/// Waits (bounded) for the answer `slot` is given; `.timedOut` if none comes in time.
func outcome(of slot: ConditionLock<WriteOutcome?>, seconds: Double = 10) -> WriteOutcome {
    slot.wait(seconds: seconds, until: { $0 != nil }, then: { value, _ in value }) ?? .timedOut
}

/// Publishes one message and waits (bounded) for the writer's answer.
func append(_ engine: DiskEngine, _ topic: String, seq: UInt64, epoch: String = "e1") -> WriteOutcome {
    let answer = ConditionLock<WriteOutcome?>(nil)
    let accepted = engine.appendMessage(topic: topic, epoch: epoch, seq: seq, publishedAt: 1000 + seq, data: Array("{\"n\":\(seq)}".utf8)) {
        error in
        answer.withLock { $0 = error.map(WriteOutcome.refused) ?? .stored }
        answer.broadcast()
    }
    guard accepted else { return .notQueued }
    return outcome(of: answer)
}

/// Commits `operations` to `store` without waiting; the slot gets how the commit was answered.
func commitLater(_ store: ModelStore, _ operations: [StoreOperation]) -> ConditionLock<WriteOutcome?> {
    let answer = ConditionLock<WriteOutcome?>(nil)
    store.commit(operations) { result in
        answer.withLock {
            switch result {
            case .success: $0 = .stored
            case .failure(let error): $0 = .refused(error)
            }
        }
        answer.broadcast()
    }
    return answer
}

/// Waits (bounded) until the writer has answered every write handed to it before this call, and
/// the notifier has run what it settled or refused of them: a message `mark` on a topic of its
/// own (the writer takes its queue in order, and hands a batch's settling to the notifier before
/// it answers the batch's messages), then a task on the notifier behind that. False if either
/// did not happen in time.
func caughtUp(_ engine: DiskEngine, mark: UInt64) -> Bool {
    guard append(engine, "caught-up", seq: mark) == .stored else { return false }
    let ran = ConditionLock(false)
    let queued = engine.notifier.enqueue {
        ran.withLock { $0 = true }
        ran.broadcast()
    }
    return queued && ran.wait(seconds: 10, until: { $0 }, then: { _, done in done })
}

func refusedWrites(_ engine: DiskEngine) -> UInt64 { engine.failedWrites.load(ordering: .relaxed) }
