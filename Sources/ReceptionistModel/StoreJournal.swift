import ReceptionistJSON

/// Where a durable store keeps its change sets (the disk engine in the gateway). A journaled
/// store applies a commit to its models at once, so the next commit can be computed on it, but
/// its readers, observers and committer see it only once the journal has stored it: the journal
/// then calls `ModelStore.settle`, or `ModelStore.unsettle` if it could not.
///
/// Any thread.
public protocol StoreJournal: Sendable {
    /// Stores `record` of `store`, after every record handed over before it, and answers through
    /// `store.settle(through:generation:)` or `store.unsettle(generation:because:)`, on the
    /// journal's own thread, in the order the records were handed over. May block while the
    /// journal is full (the committing thread waits, never the loop: only job threads commit).
    func append(_ record: JournalRecord, of store: ModelStore)

    /// Stores `store` as new and empty, in its epoch (whatever was stored under its name goes);
    /// returns once it is stored.
    func createStore(_ store: ModelStore) throws(StoreError)

    /// Forgets a store and everything stored of it; returns once that is stored.
    func deleteStore(_ name: String) throws(StoreError)
}

/// One change set as a journal stores it. The models it touched are not in it: the journal
/// keeps the models from snapshots (`ModelStore.journalSnapshot`) and the change sets after them.
public struct JournalRecord: Sendable {
    public let changeSet: ChangeSet
    /// The store's generation when it was committed: a record from before the store last undid
    /// its unsettled change sets is dropped, never stored.
    public let generation: UInt64
}

/// The models of a journaled store changed after some version, as they are at `version` (the
/// store's head when taken, which may be ahead of what the journal has stored: the journal
/// stores it once it has stored every change set up to `version`, in `generation`).
public struct JournalSnapshot: Sendable {
    public let version: UInt64
    public let generation: UInt64
    public let models: [(id: String, value: JSONValue, tag: UInt64)]
}

/// A journaled store's change set applied to its models but not yet stored.
struct Unsettled: Sendable {
    let changeSet: ChangeSet
    /// The entity tags of the models it touched, as they were before it (0: absent).
    let priorTags: [(id: String, tag: UInt64)]
    let completion: (@Sendable (Result<ChangeSet, StoreError>) -> Void)?

    func touches(_ id: String) -> Bool {
        priorTags.contains { $0.id == id }
    }
}
