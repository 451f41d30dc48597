import ReceptionistJSON

/// How a commit's operations are checked and applied to a store's models: pure functions of the
/// models and the operations, called under the store's lock.
extension ModelStore {
    /// Applies every operation or, on the first failure, none, and throws.
    ///
    /// What can fail (a bad id, a value that is not an object, a model that does not exist at
    /// that point of the commit) is found by a first pass that changes nothing, so the second
    /// pass cannot fail and keeps no copy of any model for a rollback. Each model is then reached
    /// with one lookup per operation and edited in place, in its slot: never copied out and back.
    ///
    /// `located` is scratch space the caller keeps between commits (its contents are not read).
    static func apply(
        _ operations: [StoreOperation], to models: inout ModelSlots, located: inout [Int32]
    ) throws(StoreError) -> [ModelChange] {
        // Where each operation's model is, when the commit only edits models in place (no put
        // or delete moves them): then no model is hashed twice.
        let inPlace = try validate(operations, against: models, located: &located)
        defer {
            // A commit far larger than most keeps no memory past its end.
            if located.count > 4_096 { located = [] }
        }
        var changes: [ModelChange] = []
        changes.reserveCapacity(operations.count)
        // Through the buffer, as in `validate`: no operation is copied out of the array.
        operations.withUnsafeBufferPointer { operations in
            guard let base = operations.baseAddress else { return }
            for position in operations.indices {
                apply(base + position, at: inPlace ? Int(located[position]) : nil, to: &models, changes: &changes)
            }
        }
        return changes
    }

    /// Applies one operation that `validate` passed; `located` is its model's index, if known.
    /// The operation is read through its pointer, field by field, never copied whole.
    ///
    /// Changes are built with `ModelChange`'s memberwise initialiser inside the `append` (see
    /// `ModelChange`): built elsewhere and appended, each was copied and destroyed once more.
    private static func apply(
        _ operation: UnsafePointer<StoreOperation>, at located: Int?,
        to models: inout ModelSlots, changes: inout [ModelChange]
    ) {
        // The id the model goes by: a change names it as the snapshot does, however the
        // operation wrote it ("é" as one scalar or two are one id to the store). A put finds it
        // as it places the model.
        let kind = operation.pointee.kind
        let id = kind == .put ? operation.pointee.model : located.map { models.id(at: $0) } ?? models.storedID(operation.pointee.model)
        switch kind {
        case .put:
            // `validate` passed it: a put's value is an object.
            guard let value = operation.pointee.value else { return }
            let (id, old) = models.put(value, forKey: id)
            // The same value again (byte for byte, members in the same order) changes nothing.
            if let old, old == value { return }
            changes.append(ModelChange(
                model: id, keyPath: .whole, kind: ModelChange.kind(old: old, new: value), oldValue: old, newValue: value))
        case .patch:
            guard let patch = operation.pointee.value else { return }
            func patched(_ model: inout JSONValue) {
                let before = model
                for effect in model.applyMergePatch(patch) {
                    let old = before.value(at: effect.path)
                    changes.append(ModelChange(
                        model: id, keyPath: ModelKeyPath(effect.path), kind: ModelChange.kind(old: old, new: effect.value),
                        oldValue: old, newValue: effect.value))
                }
            }
            if let located { patched(&models.values[located]!) } else { models.modify(id, patched) }
        case .set:
            if let located {
                set(
                    operation.pointee.value, at: operation.pointee.keyPath, in: &models.values[located]!, of: id,
                    slot: Int32(truncatingIfNeeded: located), changes: &changes)
            } else {
                models.modify(id) {
                    set(operation.pointee.value, at: operation.pointee.keyPath, in: &$0, of: id, slot: -1, changes: &changes)
                }
            }
        case .delete:
            let old = models.removeValue(forKey: id)
            changes.append(ModelChange(model: id, keyPath: .whole, kind: .deleted, oldValue: old, newValue: nil))
        }
    }

    /// Sets (or with nil removes) `value` at `keyPath` in `model`, in place, and appends the change.
    ///
    /// `value` and `keyPath` are the caller's copies, taken (`consuming`) and moved into the
    /// change: borrowed, each was copied once more for the change and the argument released after
    /// it, a retain and release of the key path (atomic) for every change a job sets.
    private static func set(
        _ value: consuming JSONValue?, at keyPath: consuming ModelKeyPath, in model: inout JSONValue, of id: String,
        slot: Int32, changes: inout [ModelChange]
    ) {
        // A set that must create (or turn into an object) an ancestor of its path is reported at
        // that ancestor, so that a change with no old value always means its parent was there,
        // and a receiver can undo or fold it exactly.
        if value != nil, keyPath.count > 1, let depth = Self.firstReshaped(model, keyPath.components) {
            let ancestor = Array(keyPath.components[..<depth])
            let before = model.value(at: ancestor)
            model.setValue(value, at: keyPath.components[...])
            changes.append(ModelChange(
                model: id, keyPath: ModelKeyPath(ancestor), oldValue: before, newValue: model.value(at: ancestor)))
            return
        }
        let old = keyPath.withComponents { model.replaceValue(value, along: $0) }
        // Removing what is not there, or setting the value already there (byte for byte),
        // changes nothing.
        if old == value { return }
        let kind = ModelChange.kind(old: old, new: value)
        changes.append(ModelChange(
            model: id, keyPath: keyPath, kind: kind, slotHint: slot, oldValue: old, newValue: value))
    }

    /// Throws what `apply` would fail on, in the order it would meet it, changing nothing. Models
    /// put or deleted earlier in the same commit count as they will be by then.
    ///
    /// Returns whether `located` holds each operation's model's slot in `models`, by position
    /// (it grows to one per operation, and is only ever written): it does when every operation
    /// edits a model in place (`set` and `patch`), since the slots then stay as they are while
    /// `apply` runs.
    static func validate(
        _ operations: [StoreOperation], against models: ModelSlots, located: inout [Int32]
    ) throws(StoreError) -> Bool {
        var existsNow: [String: Bool] = [:]
        var inPlace = true
        // Grown, never emptied: clearing an array runs the general `replaceSubrange`.
        if located.count < operations.count {
            located.append(contentsOf: repeatElement(0, count: operations.count - located.count))
        }
        // Through the buffer: each operation is read in place, not copied out of the array
        // (a copy retains and releases every field of it).
        // `located` through its buffer too: written by subscript, it was checked for a unique
        // reference on every operation.
        try located.withUnsafeMutableBufferPointer { slots throws(StoreError) in
            try operations.withUnsafeBufferPointer { operations throws(StoreError) in
                guard let base = operations.baseAddress else { return }
                for position in operations.indices {
                    let operation = base + position
                    let exists: Bool
                    if existsNow.isEmpty, let slot = models.slot(of: operation.pointee.model) {
                        // A model in the store has a valid id: it was checked when it was put.
                        exists = true
                        slots[position] = Int32(truncatingIfNeeded: slot)
                    } else {
                        let id = operation.pointee.model
                        guard Self.isValidModelID(id) else { throw StoreError.invalidModelID(id) }
                        exists = existsNow[id] ?? (models[id] != nil)
                    }
                    try check(operation, exists: exists, existsNow: &existsNow, inPlace: &inPlace)
                }
            }
        }
        return inPlace
    }

    /// `validate`'s check of one operation, whose model does or does not exist at that point.
    @inline(__always)
    private static func check(
        _ operation: UnsafePointer<StoreOperation>, exists: Bool, existsNow: inout [String: Bool],
        inPlace: inout Bool
    ) throws(StoreError) {
        switch operation.pointee.kind {
        case .put:
            guard let value = operation.pointee.value, value.objectValue != nil else { throw StoreError.notAnObject("a model") }
            if let problem = ModelValueRules.problem(in: value) { throw StoreError.invalidValue(problem) }
            existsNow[operation.pointee.model] = true
            inPlace = false
        case .patch:
            guard let patch = operation.pointee.value, patch.objectValue != nil else { throw StoreError.notAnObject("a merge patch") }
            guard exists else { throw StoreError.noSuchModel(operation.pointee.model) }
            if let problem = ModelValueRules.problem(in: patch) { throw StoreError.invalidValue(problem) }
        case .set:
            guard exists else { throw StoreError.noSuchModel(operation.pointee.model) }
            if operation.pointee.keyPath.count == 0, operation.pointee.value?.objectValue == nil {
                throw StoreError.notAnObject("a model")
            }
            if let problem = ModelValueRules.problem(setting: operation.pointee.value, keyPathCount: operation.pointee.keyPath.count) {
                throw StoreError.invalidValue(problem)
            }
        case .delete:
            guard exists else { throw StoreError.noSuchModel(operation.pointee.model) }
            existsNow[operation.pointee.model] = false
            inPlace = false
        }
    }

    /// The length of the shortest proper prefix of `path` at which `model` holds no object (a
    /// setter creates or replaces it there), or nil if every ancestor of `path` is an object.
    static func firstReshaped(_ model: JSONValue, _ path: [String]) -> Int? {
        var current = model
        for depth in 0..<(path.count - 1) {
            guard case .object(let members) = current, let next = members[path[depth]], case .object = next else {
                return depth == 0 && current.objectValue == nil ? 0 : depth + 1
            }
            current = next
        }
        return nil
    }

    /// A model id is 1 to 128 bytes of UTF-8 with no `/` and no control character.
    public static func isValidModelID(_ id: String) -> Bool {
        let bytes = id.utf8
        // `.` and `..` could not be named in a URL: clients and proxies remove such segments.
        guard !bytes.isEmpty, bytes.count <= 128, id != ".", id != ".." else { return false }
        for byte in bytes where byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "/") {
            return false
        }
        return true
    }
}
