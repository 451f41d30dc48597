/// What must hold for a commit to apply: the store at a version (`ifVersion`), models at the
/// versions of their last change (`If-Match`, `ifMatch`), present (`If-Match: *`) or absent
/// (`If-None-Match: *`). Checked under the store's lock against the state the commit applies to,
/// so no other commit comes between the check and the change. A failed check applies nothing.
///
/// Pure value.
public struct CommitCondition: Sendable, Hashable {
    /// What one model must be.
    public enum ModelCondition: Sendable, Hashable {
        /// Present, last changed at one of these versions (its entity tags).
        case version([UInt64])
        /// Present, whatever its version.
        case exists
        /// Absent.
        case absent
    }

    /// The store's version the commit expects, or nil for any.
    public var storeVersion: UInt64?
    public var models: [String: ModelCondition]

    public init(storeVersion: UInt64? = nil, models: [String: ModelCondition] = [:]) {
        self.storeVersion = storeVersion
        self.models = models
    }

    public static let none = CommitCondition()

    public var isNone: Bool { storeVersion == nil && models.isEmpty }

    /// Why the condition fails against a store at `version` whose models' versions `modelVersion`
    /// gives (nil: absent), or nil when it holds.
    func failure(version: UInt64, modelVersion: (String) -> UInt64?) -> StoreError? {
        if let expected = storeVersion, expected != version {
            return .preconditionFailed("the store is at version \(version), not \(expected)", version: version)
        }
        for (id, condition) in models.sorted(by: { $0.key < $1.key }) {
            let current = modelVersion(id)
            switch (condition, current) {
            case (.absent, let current?):
                return .preconditionFailed("model '\(id)' exists (its tag is \"\(current)\")", version: version)
            case (.exists, nil), (.version, nil):
                return .preconditionFailed("model '\(id)' does not exist", version: version)
            case (.version(let tags), let current?) where !tags.contains(current):
                return .preconditionFailed("model '\(id)' has the tag \"\(current)\"", version: version)
            default:
                continue
            }
        }
        return nil
    }
}
