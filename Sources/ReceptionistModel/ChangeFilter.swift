import ReceptionistJSON

/// Which models, and which key paths inside them, an observer follows; and the projection of a
/// change or a model onto them. A pure value.
///
/// Invariant (projection): for any state `s` and change set `c` taking `s` to `s'`, applying
/// `apply(c.changes)` to `project(s)` gives `project(s')`, where applying a change sets the value
/// at its path (creating missing objects) or removes it, and a removal under `paths` also drops
/// the objects it leaves empty above the listed path it lies under. Hence a subscriber that
/// starts from a projected snapshot and applies filtered changes holds the projected store.
public struct ChangeFilter: Sendable, Hashable {
    private let exactModels: Set<String>?
    /// Prefixes as UTF-8, sorted, none a prefix of another (it would add nothing): a model id has
    /// one of them as a prefix only if the greatest one not above it is, so a lookup is a binary
    /// search however many a subscription lists (the committing thread runs it for every change).
    private let modelPrefixes: [[UInt8]]
    /// Key-path prefixes, none beneath another (a prefix under another one adds nothing).
    public let paths: [ModelKeyPath]?

    public static let all = ChangeFilter(models: nil, paths: nil)

    /// - Parameter models: ids; one ending in `*` is a prefix. Nil: every model.
    /// - Parameter paths: key-path prefixes. Nil (or one that is the whole model): every path.
    public init(models: [String]?, paths: [ModelKeyPath]?) {
        if let models {
            exactModels = Set(models.filter { !$0.hasSuffix("*") })
            let prefixes = Set(models.filter { $0.hasSuffix("*") }.map { Array($0.utf8.dropLast()) })
                .sorted { $0.lexicographicallyPrecedes($1) }
            var kept: [[UInt8]] = []
            for prefix in prefixes where !(kept.last.map { prefix.starts(with: $0) } ?? false) {
                kept.append(prefix)
            }
            modelPrefixes = kept
        } else {
            exactModels = nil
            modelPrefixes = []
        }
        if let paths, !paths.contains(.whole) {
            let unique = Array(Set(paths)).sorted { $0.components.lexicographicallyPrecedes($1.components) }
            self.paths = unique.filter { path in !unique.contains { $0 != path && $0.isPrefix(of: path) } }
        } else {
            self.paths = nil
        }
    }

    /// Whether everything passes unchanged.
    public var isAll: Bool { exactModels == nil && paths == nil }

    public func follows(model: String) -> Bool {
        guard let exactModels else { return true }
        if exactModels.contains(model) { return true }
        guard !modelPrefixes.isEmpty else { return false }
        return model.utf8.withContiguousStorageIfAvailable(hasListedPrefix) ?? hasListedPrefix(Array(model.utf8))
    }

    private func hasListedPrefix(_ id: some Collection<UInt8>) -> Bool {
        // The greatest prefix not above `id`.
        var low = 0, high = modelPrefixes.count
        while low < high {
            let middle = (low + high) / 2
            if id.lexicographicallyPrecedes(modelPrefixes[middle]) { high = middle } else { low = middle + 1 }
        }
        return low > 0 && id.starts(with: modelPrefixes[low - 1])
    }

    /// The changes this filter keeps, each cut down to the listed paths.
    ///
    /// A change at or under a listed path passes as it is. A change above listed paths is cut
    /// down to one change per listed path beneath it whose value differs; the creation or deletion
    /// of a whole model instead passes at the model's root with its value projected, so that a
    /// subscriber learns that the model exists (or no longer does).
    public func apply(_ changes: [ModelChange]) -> [ModelChange] {
        if isAll { return changes }
        var kept: [ModelChange] = []
        for change in changes where follows(model: change.model) {
            guard let paths else {
                kept.append(change)
                continue
            }
            if paths.contains(where: { $0.isPrefix(of: change.keyPath) }) {
                kept.append(change)
                continue
            }
            if change.keyPath == .whole && change.kind != .updated {
                kept.append(ModelChange(
                    model: change.model, keyPath: .whole,
                    oldValue: change.oldValue.map(project(model:)), newValue: change.newValue.map(project(model:))))
                continue
            }
            let depth = change.keyPath.count
            for path in paths where change.keyPath.isPrefix(of: path) {
                let below = path.components.dropFirst(depth)
                let old = change.oldValue?.value(at: below)
                let new = change.newValue?.value(at: below)
                guard old != new else { continue }
                kept.append(ModelChange(model: change.model, keyPath: path, oldValue: old, newValue: new))
            }
        }
        return kept
    }

    /// Coalesced changes with each whole-model value projected again: a model created within a
    /// frame absorbs the later changes beneath it, and a removal among them can leave objects that
    /// lead nowhere (`{"style":{}}` for `paths: ["style.border"]`), which the projection has not.
    public func projectingRoots(_ changes: [ModelChange]) -> [ModelChange] {
        guard paths != nil else { return changes }
        return changes.map { change in
            guard change.keyPath == .whole else { return change }
            return ModelChange(
                model: change.model, keyPath: .whole, oldValue: change.oldValue.map(project(model:)),
                newValue: change.newValue.map(project(model:)))
        }
    }

    /// The part of one model this filter follows: the values at the listed paths, with the
    /// objects that lead to them, each member in its place in the model and named as stored.
    public func project(model value: JSONValue) -> JSONValue {
        guard let paths else { return value }
        return Self.part(of: value, under: paths.map { $0.components[...] }) ?? .object([:])
    }

    /// What of `value` lies under `paths` (relative to it), members in the value's order; nil
    /// when nothing does. Each level looks up only the keys the paths name.
    private static func part(of value: JSONValue, under paths: [ArraySlice<String>]) -> JSONValue? {
        if paths.contains(where: \.isEmpty) { return value }
        guard case .object(let members) = value else { return nil }
        var found: [Int] = []
        for path in paths {
            if let index = members.index(forKey: path[path.startIndex]), !found.contains(index) { found.append(index) }
        }
        var kept = JSONObject()
        for index in found.sorted() {
            let key = members.keys[index]
            let below = paths.filter { $0[$0.startIndex] == key }.map { $0.dropFirst() }
            if let part = part(of: members.values[index], under: below) { kept[key] = part }
        }
        return kept.isEmpty ? nil : .object(kept)
    }

    /// The models this filter follows, each projected.
    public func project(_ models: [String: JSONValue]) -> [String: JSONValue] {
        if isAll { return models }
        var projected: [String: JSONValue] = [:]
        for (id, value) in models where follows(model: id) {
            projected[id] = project(model: value)
        }
        return projected
    }
}
