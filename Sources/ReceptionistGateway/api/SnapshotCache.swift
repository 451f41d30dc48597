import ReceptionistModel
import ReceptionistSync

/// The newest large snapshots read whole, as the bytes of their answers: every reader of a store
/// at the same version in the same epoch is sent the one buffer. A hundred readers of a 20 MiB
/// store that read slowly held a hundred copies; now they share one.
///
/// At most `capacity` entries, the oldest made going first; a small snapshot is not kept, as
/// building it again costs less than keeping it. Any thread.
final class SnapshotCache: Sendable {
    private struct Entry {
        let store: String
        let epoch: String
        let version: UInt64
        let body: SharedBytes
    }

    static let capacity = 8
    /// Smaller answers are built for each reader.
    static let minBytes = 64 * 1024

    private let entries = PThreadLock<[Entry]>([])

    /// The answer's bytes for `store` at `version` in `epoch`, kept or built by `build` (outside
    /// the lock: readers of other stores do not wait for it).
    func body(store: String, epoch: String, version: UInt64, build: () -> [UInt8]) -> SharedBytes {
        let kept = entries.withLock { entries in
            entries.first { $0.store == store && $0.version == version && $0.epoch == epoch }?.body
        }
        if let kept { return kept }
        let body = SharedBytes(build())
        guard body.count >= Self.minBytes else { return body }
        entries.withLock { entries in
            entries.removeAll { $0.store == store }
            if entries.count == Self.capacity { entries.removeFirst() }
            entries.append(Entry(store: store, epoch: epoch, version: version, body: body))
        }
        return body
    }
}
