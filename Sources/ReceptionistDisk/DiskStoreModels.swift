import ReceptionistModel

/// The disk engine keeps a store's models as a snapshot at some version (`stores.models_version`)
/// and the change sets after it; this is the writer's account of that, per store. A store's
/// models are written from a snapshot taken every `DiskWriter.snapshotEvery` change sets or
/// `snapshotSeconds`, once every change set up to its version is stored, and at a clean close; a
/// start replays the change sets after the snapshot. So a commit hands the writer only its change
/// set, never the models it touched (each of which it would then copy on its next write).
/// Writer thread only.
struct DiskStoreModels {
    /// The version the stored models are at; change sets after it are never compacted away.
    var version: UInt64
    /// Change sets stored since the last snapshot was taken.
    var since: UInt64
    /// When the last snapshot was taken (microseconds since the epoch).
    var takenAt: UInt64
    /// A snapshot taken and waiting for the change sets up to its version to be stored.
    var waiting: JournalSnapshot?
    /// The models deleted after `version`, each with the version that deleted it: a snapshot
    /// lists the models there are, so the rows of the ones gone are deleted from this list.
    var deleted: [(id: String, version: UInt64)] = []
    /// The live store object, to take the next snapshot of (nil for a loaded store until it is
    /// written to).
    var store: ModelStore?

    init(version: UInt64, stored: UInt64, now: UInt64) {
        self.version = version
        since = stored - version
        takenAt = now
    }
}
