import ReceptionistJSON

/// Everything one commit changed, under one version. Observers always see a change set whole.
public struct ChangeSet: Sendable, Hashable {
    public let store: String
    /// The store's version after this commit; each commit adds exactly one.
    public let version: UInt64
    /// Wall-clock time of the commit, in microseconds since the Unix epoch.
    public let committedAtMicroseconds: UInt64
    public var changes: [ModelChange]
    /// A replica was reset to a snapshot: `changes` take the old state to the new one, but the
    /// versions in between are unknown, so a subscriber needs a fresh snapshot, not this diff.
    public var isReset = false
    /// A replica's epoch when it applied this change set (a reset's: the epoch it moved to). A
    /// replica's epoch changes under the loop, so what was made before a reset is labelled with
    /// the epoch it was made in, not the store's by the time it is sent. Nil for a store whose
    /// epoch is fixed for its life.
    public var epoch: String?

    public init(store: String, version: UInt64, committedAtMicroseconds: UInt64, changes: [ModelChange]) {
        self.store = store
        self.version = version
        self.committedAtMicroseconds = committedAtMicroseconds
        self.changes = changes
    }
}

extension ChangeSet {
    /// About how many bytes the change set holds (its values before and after, model ids and key
    /// paths): its weight in a store's history (`--history-bytes`). Counted on every commit, so
    /// the common values are weighed here, without a call per value.
    public var approximateBytes: Int {
        @inline(__always) func weight(_ value: borrowing JSONValue?) -> Int {
            switch value {
            case nil, .null?, .bool?: 5
            case .number(let number)?: number.approximateBytes
            case .string(let text)?: text.utf8.count + 2
            case let value?: value.approximateBytes
            }
        }
        // Read in place: a change copied out of the array retains and releases each of its fields.
        return changes.withUnsafeBufferPointer { buffer in
            var total = 64
            guard let base = buffer.baseAddress else { return total }
            for index in 0..<buffer.count {
                let change = base + index
                total += 32 + change.pointee.model.utf8.count + change.pointee.keyPath.utf8Count
                total += weight(change.pointee.oldValue) + weight(change.pointee.newValue)
            }
            return total
        }
    }
}
