import ReceptionistModel
import ReceptionistSync

/// The newest large snapshots read whole, as the bytes of their answers: every reader of a store
/// at the same version in the same epoch is sent the one buffer. A hundred readers of a 20 MiB
/// store that read slowly held a hundred copies; now they share one.
///
/// At most `capacity` entries and `maxBytes` together, the oldest made going first; a small
/// snapshot is not kept, as building it again costs less than keeping it, nor one larger than
/// half of `maxBytes`. A deleted store's entry goes with it. Any thread.
final class SnapshotCache: Sendable {
    private struct Entry {
        let store: String
        let epoch: String
        let version: UInt64
        let resets: UInt64
        let body: SharedBytes
    }

    static let capacity = 8
    static let maxBytes = 128 << 20
    /// Smaller answers are built for each reader.
    static let minBytes = 64 * 1024

    private let entries = PThreadLock<[Entry]>([])

    /// The answer's bytes for `store` at `version` in `epoch` after `resets` replica resets, kept
    /// or built by `build` (outside the lock: readers of other stores do not wait for it).
    func body(store: String, epoch: String, version: UInt64, resets: UInt64 = 0, build: () -> [UInt8]) -> SharedBytes {
        let kept = entries.withLock { entries in
            entries.first { $0.store == store && $0.version == version && $0.epoch == epoch && $0.resets == resets }?.body
        }
        if let kept { return kept }
        let body = SharedBytes(build())
        guard body.count >= Self.minBytes, body.count <= Self.maxBytes / 2 else { return body }
        entries.withLock { entries in
            entries.removeAll { $0.store == store }
            while !entries.isEmpty, entries.count == Self.capacity || entries.reduce(body.count, { $0 + $1.body.count }) > Self.maxBytes {
                entries.removeFirst()
            }
            entries.append(Entry(store: store, epoch: epoch, version: version, resets: resets, body: body))
        }
        return body
    }

    /// Forgets what is kept of `store`: it was deleted.
    func forget(store: String) {
        entries.withLock { $0.removeAll { $0.store == store } }
    }
}
