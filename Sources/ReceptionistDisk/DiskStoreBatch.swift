import ReceptionistJSON
import ReceptionistModel

/// What one batch of the disk writer writes for one store: its change sets as the row being
/// built, how many, the models they deleted, and the next version the store must store. A
/// class, so that the records that follow one another for the same store reach it without a
/// lookup by name (hashing the name several times a record was a fifth of the writer's time on
/// single-change commits). Writer thread only.
final class DiskStoreBatch {
    let name: String
    let store: ModelStore
    /// The next version the store must store: written back to the writer's table at the batch's end.
    var next: UInt64
    /// The row being built: the log entries of versions `first...last` as one JSON array, closed
    /// after every change set so that it is bound as it stands.
    var row: (first: UInt64, last: UInt64, text: JSONBuffer)?
    /// Change sets stored in this batch.
    var count = 0
    /// The models this batch's change sets deleted, each with the version that deleted it.
    var deleted: [(id: String, version: UInt64)] = []

    init(name: String, store: ModelStore, next: UInt64) {
        self.name = name
        self.store = store
        self.next = next
    }

    var object: ObjectIdentifier { ObjectIdentifier(store) }
}
