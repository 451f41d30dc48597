import ReceptionistJSON

/// What one batch of the disk writer writes for one store: its change sets as the row being
/// built, each model it touched (as it is after the batch), and the next version it must store.
/// A class, so that the records that follow one another for the same store reach it without a
/// lookup by name (hashing the name several times a record was a fifth of the writer's time on
/// single-change commits). Writer thread only.
final class DiskStoreBatch {
    let name: String
    let store: ObjectIdentifier
    /// The next version the store must store: written back to the writer's table at the batch's end.
    var next: UInt64
    /// The row being built: the log entries of versions `first...last` as one JSON array, closed
    /// after every change set so that it is bound as it stands.
    var row: (first: UInt64, last: UInt64, text: JSONBuffer)?
    /// Each model the batch touched, with its value after the batch (nil: deleted) and the version
    /// of its last change.
    var models: [String: (value: JSONValue?, version: UInt64)] = [:]

    init(name: String, store: ObjectIdentifier, next: UInt64) {
        self.name = name
        self.store = store
        self.next = next
    }
}
