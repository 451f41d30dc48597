import ReceptionistModel
import ReceptionistSync

/// One write waiting for the disk engine's writer thread.
enum DiskWrite: Sendable {
    /// A journaled store's change set.
    case change(JournalRecord, ModelStore)
    /// A store made (anew: whatever was stored under its name goes).
    case createStore(ModelStore, DiskSignal)
    case deleteStore(String, DiskSignal)
    /// A topic's next message; `completion` runs on the writer thread once it is stored (nil) or not.
    case message(DiskMessage)
    /// A topic forgotten after `--topic-ttl` of quiet: it and its messages go.
    case forgetTopic(String)
    /// An idempotency key claimed, answered or released.
    case idempotency(DiskIdempotencyWrite)

    /// A topic message's data bytes, what `DiskOptions.maxQueuedMessageBytes` counts; 0 otherwise.
    var messageBytes: Int {
        if case .message(let message) = self { return message.data.count }
        return 0
    }
}

struct DiskMessage: Sendable {
    let topic: String
    let epoch: String
    let seq: UInt64
    let publishedAt: UInt64
    let data: [UInt8]
    let completion: @Sendable (StoreError?) -> Void
}

/// Where a thread that waits for one write (a store made or deleted) hears how it went.
final class DiskSignal: Sendable {
    private let outcome = ConditionLock<StoreError??>(nil)

    func finish(_ error: StoreError?) {
        outcome.withLock { $0 = .some(error) }
        outcome.broadcast()
    }

    /// The write's error, nil once it is stored; a time-out after `seconds` is an error too.
    func wait(seconds: Double) -> StoreError? {
        let result = outcome.wait(seconds: seconds, until: { $0 != nil }, then: { value, _ in value })
        guard let result else { return .outcomeUnknown("the disk did not answer within \(Int(seconds)) s") }
        return result ?? nil
    }
}
