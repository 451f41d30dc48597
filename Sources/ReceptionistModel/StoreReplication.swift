import ReceptionistJSON

/// Where a replicated store sends its commits: a shared log (Redis in the gateway) that gives
/// every change set of a store one global version. The local `ModelStore` is then a replica,
/// changed only by `applyReplicated` and `resetReplica`, in the log's order.
///
/// Any thread; both methods block the calling job thread until the log answers.
public protocol StoreReplication: Sendable {
    /// Appends `changeSet` (computed against `expectedVersion`) to the store's log if the log is
    /// still at `expectedVersion`. `models` holds the touched models' new values (nil: deleted).
    func commit(_ changeSet: ChangeSet, models: [String: JSONValue?], expectedVersion: UInt64) -> ReplicationOutcome

    /// Registers a new store in the log; throws `storeExists` or `unavailable`.
    func createStore(_ name: String) throws(StoreError)
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

/// One change as the log carries it: where, and the new value (nil: removed).
public struct ReplicatedChange: Sendable, Hashable {
    public let model: String
    public let keyPath: ModelKeyPath
    public let value: JSONValue?

    public init(model: String, keyPath: ModelKeyPath, value: JSONValue?) {
        self.model = model
        self.keyPath = keyPath
        self.value = value
    }
}

/// The log's entry for one change set: `{"v": version, "t": committedAt, "c": [{"m", "p", "v"}]}`,
/// with each path as an array of keys (a key may contain a dot). Pure.
public enum ReplicatedChangeSet {
    public static func encode(_ changeSet: ChangeSet) -> JSONValue {
        let changes: [JSONValue] = changeSet.changes.map { change in
            var object: JSONObject = [
                "m": .string(change.model), "p": .array(change.keyPath.components.map { .string($0) }),
            ]
            if let value = change.newValue { object["v"] = value }
            return .object(object)
        }
        return [
            "v": .number(JSONNumber(changeSet.version)), "t": .number(JSONNumber(changeSet.committedAtMicroseconds)),
            "c": .array(changes),
        ]
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
            changes.append(ReplicatedChange(model: model, keyPath: ModelKeyPath(components), value: item["v"]))
        }
        return (version, time, changes)
    }
}
