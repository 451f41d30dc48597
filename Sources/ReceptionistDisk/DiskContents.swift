import ReceptionistJSON
import ReceptionistModel

/// What the disk engine found in its data directory at start: every store and topic as stored.
public struct DiskContents: Sendable {
    public struct Store: Sendable {
        public let name: String
        public let epoch: String
        public let version: UInt64
        /// The version the stored models were at: the change sets after it were replayed onto
        /// them, so `models` are at `version`.
        public let modelsVersion: UInt64
        public let models: [(id: String, value: JSONValue, tag: UInt64)]
        /// The newest change sets kept, oldest first.
        public let history: [ChangeSet]
        /// The models the change sets after `modelsVersion` deleted, each with the version that
        /// deleted it: their rows are still stored, until the next snapshot of the models.
        public var deleted: [(id: String, version: UInt64)] = []
    }

    public struct Message: Sendable {
        public let seq: UInt64
        public let publishedAt: UInt64
        public let data: [UInt8]
    }

    public struct Topic: Sendable {
        public let name: String
        public let epoch: String
        public let seq: UInt64
        /// The newest messages kept, oldest first.
        public let messages: [Message]
    }

    public var stores: [Store] = []
    public var topics: [Topic] = []
    /// The idempotency keys still in their window, oldest first.
    public var idempotencyKeys: [DiskIdempotencyRecord] = []
    /// The last run ended without a clean shutdown, with writes acknowledged before they were
    /// synced, on a machine that has restarted since: the newest of them may be lost, so every
    /// store and topic was given a new epoch (their subscribers are reset, never moved back).
    public var newEpochs = false
    /// Why the epochs are new: the data file is not the one this directory last ran on (a copy
    /// put back from a backup goes back in time), rather than a lost tail.
    public var replacedDataFile = false
}
