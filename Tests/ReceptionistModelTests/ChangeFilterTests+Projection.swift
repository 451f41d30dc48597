import ReceptionistJSON
@testable import ReceptionistModel
import ReceptionistTestSupport
import Testing

/// The projection invariant on random histories: applying the filtered changes to the projection
/// gives the projected store.
extension ChangeFilterTests {
    // MARK: The projection invariant, on random histories

    /// Random operations on a few models with nested objects, each valid where it is generated.
    struct OperationSource {
        var random: SeededGenerator
        static let ids = ["m0", "m1", "x2"]
        static let keys = ["a", "b", "c"]

        mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }
        mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }

        mutating func leaf() -> JSONValue {
            switch Int.random(in: 0..<10, using: &random) {
            case 0: .null
            case 1: .string(pick(["x", "y"]))
            case 2: .bool(true)
            default: .number(JSONNumber(Int.random(in: 0...3, using: &random)))
            }
        }

        mutating func object(depth: Int) -> JSONValue {
            var members = JSONObject()
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                members[pick(Self.keys)] = depth > 0 && chance(50) ? object(depth: depth - 1) : leaf()
            }
            return .object(members)
        }

        mutating func value(depth: Int) -> JSONValue { chance(40) ? object(depth: depth) : leaf() }

        mutating func path() -> ModelKeyPath {
            ModelKeyPath((0..<Int.random(in: 1...3, using: &random)).map { _ in pick(Self.keys) })
        }

        /// A merge patch: members removed (null), replaced, or merged into.
        mutating func patch(depth: Int) -> JSONValue {
            var members = JSONObject()
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let key = pick(Self.keys)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: members[key] = .null
                case 1 where depth > 0: members[key] = patch(depth: depth - 1)
                default: members[key] = value(depth: 1)
                }
            }
            return .object(members)
        }

        /// Every path that holds a value in `value`.
        static func paths(in value: JSONValue, under prefix: [String] = []) -> [ModelKeyPath] {
            guard case .object(let members) = value else { return [] }
            return members.flatMap { key, member in [ModelKeyPath(prefix + [key])] + paths(in: member, under: prefix + [key]) }
        }

        mutating func operation(on models: [String: JSONValue]) -> StoreOperation {
            let existing = models.keys.sorted()
            if existing.isEmpty || chance(15) {
                return .put(model: pick(Self.ids), value: object(depth: 3))
            }
            let model = pick(existing)
            switch Int.random(in: 0..<10, using: &random) {
            case 0: return .delete(model: model)
            case 1: return .put(model: model, value: object(depth: 3))
            case 2, 3: return .patch(model: model, patch: patch(depth: 2))
            case 4, 5:
                // A removal, of a path that is there (removing a path that is not there is not a change).
                let present = Self.paths(in: models[model] ?? [:])
                if present.isEmpty { return .set(model: model, keyPath: path(), value: leaf()) }
                return .set(model: model, keyPath: pick(present), value: nil)
            case 6: return .set(model: model, keyPath: .whole, value: object(depth: 3))
            default: return .set(model: model, keyPath: path(), value: value(depth: 2))
            }
        }

        /// One to three operations that apply in order.
        mutating func commit(on models: [String: JSONValue]) -> [StoreOperation] {
            var state = ModelSlots(models)
            var operations: [StoreOperation] = []
            var located: [Int32] = []
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let operation = operation(on: state.dictionary)
                if (try? ModelStore.apply([operation], to: &state, located: &located)) != nil { operations.append(operation) }
            }
            return operations
        }
    }

    /// A subscriber's copy: applies one change by the rule of `docs/PROTOCOL.md`. Set the value at
    /// the path, creating the model and missing objects, or remove it when the kind is `deleted`;
    /// after a removal under the listed paths, drop the objects left empty above the listed path.
    static func applyAsSubscriber(_ change: ModelChange, listed: [ModelKeyPath]?, to models: inout [String: JSONValue]) {
        let path = change.keyPath.components
        guard change.kind == .deleted else {
            let value = change.newValue ?? .null  // on the wire, a missing value is a null
            if path.isEmpty {
                models[change.model] = value
            } else {
                var model = models[change.model] ?? .object([:])
                model.setValue(value, at: path[...])
                models[change.model] = model
            }
            return
        }
        if path.isEmpty {
            models[change.model] = nil
            return
        }
        guard var model = models[change.model] else { return }
        model.setValue(nil, at: path[...])
        if let above = listed?.first(where: { $0.isPrefix(of: change.keyPath) }) {
            var depth = above.components.count - 1
            while depth > 0, model.value(at: above.components.prefix(depth)) == .object([:]) {
                model.setValue(nil, at: above.components.prefix(depth))
                depth -= 1
            }
        }
        models[change.model] = model
    }

    /// JSON equality: an object's members compared whatever their order.
    static func unordered(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            .object(JSONObject(uniqueKeysWithValues: members.map { ($0.key, unordered($0.value)) }.sorted { $0.0 < $1.0 }))
        case .array(let items): .array(items.map(unordered))
        default: value
        }
    }

    static func unordered(_ models: [String: JSONValue]) -> [String: JSONValue] { models.mapValues(unordered) }

    static let filters: [(name: String, filter: ChangeFilter)] = [
        ("all", .all),
        ("models m0", ChangeFilter(models: ["m0"], paths: nil)),
        ("models m*", ChangeFilter(models: ["m*"], paths: nil)),
        ("paths a", ChangeFilter(models: nil, paths: ["a"])),
        ("paths a.b", ChangeFilter(models: nil, paths: ["a.b"])),
        ("paths a.b c", ChangeFilter(models: nil, paths: ["a.b", "c"])),
        ("paths a.b.c b.a", ChangeFilter(models: nil, paths: ["a.b.c", "b.a"])),
        ("paths a.a a.b a.c.c", ChangeFilter(models: nil, paths: ["a.a", "a.b", "a.c.c"])),
        ("paths a a.b", ChangeFilter(models: nil, paths: ["a", "a.b"])),
        ("models m1 x* paths b c.a.b", ChangeFilter(models: ["m1", "x*"], paths: ["b", "c.a.b"])),
    ]

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func applyingFilteredChangesToTheProjectionGivesTheProjectedStore(seed: UInt64) throws {
        var source = OperationSource(random: SeededGenerator(state: seed))
        let store = ModelStore(name: "s")
        var before = store.snapshot().models
        // Start from a store with something in it, as a subscriber usually does.
        for _ in 0..<3 {
            let operations = source.commit(on: before)
            if !operations.isEmpty { try store.commit(operations) }
            before = store.snapshot().models
        }
        var copies = Self.filters.map { $0.filter.project(before) }
        var failed = Set<Int>()
        var checked = 0
        for step in 0..<300 {
            let operations = source.commit(on: store.snapshot().models)
            guard !operations.isEmpty else { continue }
            let changeSet = try store.commit(operations)
            let after = store.snapshot().models
            for (index, entry) in Self.filters.enumerated() where !failed.contains(index) {
                for change in entry.filter.apply(changeSet.changes) {
                    Self.applyAsSubscriber(change, listed: entry.filter.paths, to: &copies[index])
                }
                let expected = Self.unordered(entry.filter.project(after))
                let got = Self.unordered(copies[index])
                if got != expected {
                    failed.insert(index)
                    Issue.record("""
                        seed \(seed), step \(step), filter \(entry.name): \(operations)
                        changes \(changeSet.changes)
                        filtered \(entry.filter.apply(changeSet.changes))
                        expected \(expected)
                        got \(got)
                        """)
                }
                checked += 1
            }
        }
        #expect(checked > 250 * Self.filters.count, "the generator commits most of the time")
    }

    /// The generator is not idle: every filter sees cut-downs, creations and removals.
    @Test func theRandomHistoriesExerciseEveryCase() throws {
        var source = OperationSource(random: SeededGenerator(state: 1))
        let store = ModelStore(name: "s")
        var kinds = Set<String>()
        let filter = ChangeFilter(models: nil, paths: ["a.b", "c"])
        for _ in 0..<300 {
            let operations = source.commit(on: store.snapshot().models)
            guard !operations.isEmpty else { continue }
            let changeSet = try store.commit(operations)
            for change in changeSet.changes where filter.follows(model: change.model) {
                let listed = filter.paths ?? []
                let above = listed.contains { change.keyPath.isPrefix(of: $0) && change.keyPath != $0 }
                kinds.insert((above ? "above " : "other ") + change.kind.rawValue)
            }
            for change in filter.apply(changeSet.changes) {
                kinds.insert("kept " + (change.keyPath == .whole ? "root " : "") + change.kind.rawValue)
            }
        }
        for kind in ["above updated", "above created", "above deleted", "kept created", "kept updated", "kept deleted",
                     "kept root created", "kept root deleted"] {
            #expect(kinds.contains(kind), "\(kind)")
        }
    }
}
