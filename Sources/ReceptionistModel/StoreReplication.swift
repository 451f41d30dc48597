import ReceptionistJSON

/// Where a replicated store sends its commits: a shared log (Redis in the gateway) that gives
/// every change set of a store one global version. The local `ModelStore` is then a replica,
/// changed only by `applyReplicated` and `resetReplica`, in the log's order.
///
/// Any thread. `commit` never waits; `createStore` and `deleteStore` block the calling job thread until the log
/// answers (stores are made and deleted rarely).
public protocol StoreReplication: Sendable {
    /// Appends `changeSet` (computed against `expectedVersion` of the store in `epoch`) to the
    /// store's log if the log is still at `expectedVersion`, in that epoch: a store deleted and
    /// made again under the name meanwhile is another store. `models` holds the touched models'
    /// new values (nil: deleted).
    ///
    /// `completion` runs once, on any thread, and never inside a lock of this store:
    /// `.committed(v)` only once this node's replica has applied `v`, `.conflict(c)` only once it
    /// has reached `c` (or when `c` is behind it: the log was lost), so the caller can recompute at
    /// once. The log's wait is bounded: past it, `.failed`.
    func commit(
        _ changeSet: ChangeSet, models: [String: JSONValue?], expectedVersion: UInt64, epoch: String,
        completion: @escaping @Sendable (ReplicationOutcome) -> Void)

    /// Registers a new store in the log. `completion` runs once, on any thread, with nil when
    /// created, else `storeExists` or `unavailable`; no thread waits for the log meanwhile.
    func createStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void)

    /// Deletes the store and its log. `completion` runs once, on any thread, with nil when
    /// deleted, else `noSuchStore`, `unavailable` or `outcomeUnknown`; no thread waits for the log
    /// meanwhile. Every node's replica of it is dropped, and its subscribers told, as each node
    /// hears of it.
    func deleteStore(_ name: String, completion: @escaping @Sendable (StoreError?) -> Void)
}

/// What the log said to a commit.
public enum ReplicationOutcome: Sendable, Equatable {
    /// Appended under this version.
    case committed(UInt64)
    /// The log had moved on to this version; recompute against it and try again.
    case conflict(UInt64)
    /// Not appended (or, for `unavailable`, perhaps appended: the answer was lost).
    case failed(StoreError)
}

/// One change as the log carries it: where, the new value (nil: removed) and the value before
/// (nil: there was none).
public struct ReplicatedChange: Sendable, Hashable {
    public let model: String
    public let keyPath: ModelKeyPath
    public let value: JSONValue?
    public let oldValue: JSONValue?

    public init(model: String, keyPath: ModelKeyPath, value: JSONValue?, oldValue: JSONValue? = nil) {
        self.model = model
        self.keyPath = keyPath
        self.value = value
        self.oldValue = oldValue
    }
}

/// The log's entry for one change set: `{"v": version, "t": committedAt, "c": [{"m", "p", "v",
/// "o"}]}`, with each path as an array of keys (a key may contain a dot). It carries the values
/// before the changes too, so a change set read back from the log (a resume older than a node's
/// own history) is the one observers saw, kinds and old values included. Pure.
public enum ReplicatedChangeSet {
    public static func encode(_ changeSet: ChangeSet) -> JSONValue {
        let changes: [JSONValue] = changeSet.changes.map { change in
            var object: JSONObject = [
                "m": .string(change.model), "p": .array(change.keyPath.components.map { .string($0) }),
            ]
            if let value = change.newValue { object["v"] = value }
            if let old = change.oldValue { object["o"] = old }
            return .object(object)
        }
        return [
            "v": .number(JSONNumber(changeSet.version)), "t": .number(JSONNumber(changeSet.committedAtMicroseconds)),
            "c": .array(changes),
        ]
    }

    /// Appends `encode(changeSet)` as JSON text to `buffer`: what the disk engine stores for
    /// every change set, so it is written field by field with no tree and no array in between.
    public static func write(_ changeSet: ChangeSet, to out: JSONBuffer) {
        out.append("{\"v\":")
        JSONNumber(changeSet.version).write(to: out)
        out.append(",\"t\":")
        JSONNumber(changeSet.committedAtMicroseconds).write(to: out)
        out.append(",\"c\":[")
        // Read in place, field by field: iterating copied each change whole (a retain and a
        // release of each of its fields).
        changeSet.changes.withUnsafeBufferPointer { changes in
            guard let base = changes.baseAddress else { return }
            for index in changes.indices {
                let change = base + index
                out.append(index > 0 ? ",{\"m\":" : "{\"m\":")
                out.writeString(change.pointee.model)
                out.append(",\"p\":[")
                change.pointee.keyPath.withComponents { keys in
                    for position in keys.indices {
                        if position > 0 { out.append(UInt8(ascii: ",")) }
                        out.writeString(keys[position])
                    }
                }
                out.append(UInt8(ascii: "]"))
                if let value = change.pointee.newValue {
                    out.append(",\"v\":")
                    out.write(value)
                }
                if let old = change.pointee.oldValue {
                    out.append(",\"o\":")
                    out.write(old)
                }
                out.append(UInt8(ascii: "}"))
            }
        }
        out.append("]}")
    }

    /// Decodes an entry; nil when it is not one.
    public static func decode(_ value: JSONValue) -> (version: UInt64, committedAt: UInt64, changes: [ReplicatedChange])? {
        guard let version = value["v"]?.uint64Value, let time = value["t"]?.uint64Value,
              case .array(let items)? = value["c"], version >= 1
        else { return nil }
        var changes: [ReplicatedChange] = []
        for item in items {
            guard let model = item["m"]?.stringValue, case .array(let path)? = item["p"] else { return nil }
            var components: [String] = []
            for key in path {
                guard let key = key.stringValue else { return nil }
                components.append(key)
            }
            changes.append(ReplicatedChange(model: model, keyPath: ModelKeyPath(components), value: item["v"], oldValue: item["o"]))
        }
        return (version, time, changes)
    }

    /// An entry as the change set observers saw when it was committed; nil when it is not one.
    public static func changeSet(of store: String, _ value: JSONValue) -> ChangeSet? {
        guard let (version, committedAt, changes) = decode(value) else { return nil }
        return ChangeSet(
            store: store, version: version, committedAtMicroseconds: committedAt,
            changes: changes.map { ModelChange(model: $0.model, keyPath: $0.keyPath, oldValue: $0.oldValue, newValue: $0.value) })
    }
}
