import ReceptionistJSON

/// A store's models, each in a numbered slot that it keeps while it lives, found by id through
/// a `ModelTable`.
///
/// A commit looks up the model of every operation it applies. In a `Dictionary` that lookup
/// hashed the id with SipHash through `Hasher` and was a fifth of a committed change; here it is
/// the table's word-at-a-time hash and probe, and the slot found is then edited in place.
///
/// Invariants: `table` maps each live id to its slot; `ids[slot]` and `values[slot]` are that
/// model's; a free slot holds nil and is listed in `free`, to be used again by the next new
/// model. A slot's number means nothing across a put or a delete of another model.
struct ModelSlots: Sendable {
    private var table = ModelTable()
    private var ids: [String] = []
    /// Per slot: the model, or nil when the slot is free. Edited in place through `slot(of:)`.
    var values: [JSONValue?] = []
    /// Per slot: the store version of the model's last change, its entity tag (`ETag`). Stamped
    /// by the store after each commit; 0 in a free slot.
    private(set) var versions: [UInt64] = []
    private var free: [Int32] = []
    private(set) var count = 0

    init() {}

    /// `models`, each stamped as last changed at `version` (a snapshot's, where nothing older is
    /// known: a later `If-Match` with an older tag then fails safe, never passes wrongly).
    init(_ models: [String: JSONValue], version: UInt64 = 0) {
        for (id, value) in models { updateValue(value, forKey: id) }
        for index in versions.indices { versions[index] = version }
    }

    /// Room for `count` models without growing.
    mutating func reserveCapacity(_ count: Int) {
        table.reserveCapacity(count)
        ids.reserveCapacity(count)
        values.reserveCapacity(count)
        versions.reserveCapacity(count)
    }

    /// The version of the model `id`'s last change, if the store has it.
    func version(of id: String) -> UInt64? {
        slot(of: id).map { versions[$0] }
    }

    /// Stamps every model `changes` touched as last changed at `version`, and returns each once, in
    /// the order first touched, with its tag before (0: it did not exist): what undoing the commit
    /// puts back. `deleted` are the tags of the models the commit deleted, read before it applied
    /// (a deleted model's slot is gone); they come first. One lookup per change, or none where
    /// the change carries its slot: a journaled commit pays nothing else to know what it touched.
    mutating func stamp(
        _ changes: [ModelChange], version: UInt64, deleted: [(id: String, tag: UInt64)]
    ) -> [(id: String, tag: UInt64)] {
        var touched = deleted
        // Read in place, field by field: iterating copied each change whole (its model, path and
        // both values retained and released) to read two of its fields.
        changes.withUnsafeBufferPointer { changes in
            guard let base = changes.baseAddress else { return }
            for index in changes.indices {
                let change = base + index
                let hint = Int(change.pointee.slotHint)
                let slot: Int
                if hint >= 0, hint < values.count {
                    slot = hint
                } else if let found = self.slot(of: change.pointee.model) {
                    slot = found
                } else {
                    continue  // deleted: listed in `deleted`
                }
                guard versions[slot] != version else { continue }
                // A model deleted, then put again, is listed once, with its tag from before the delete.
                if deleted.isEmpty || !deleted.contains(where: { $0.id == change.pointee.model }) {
                    touched.append((change.pointee.model, versions[slot]))
                }
                versions[slot] = version
            }
        }
        return touched
    }

    /// Records that the model in `slot` (or, with a slot of -1, the model `id`) last changed at `version`.
    @inline(__always)
    mutating func stamp(_ id: String, slot: Int32, version: UInt64) {
        // A change's slot hint is exact within its own commit (it is set only where no put or
        // delete moves a model), which is when the store stamps it.
        if slot >= 0, Int(slot) < values.count {
            versions[Int(slot)] = version
        } else if let found = self.slot(of: id) {
            versions[found] = version
        }
    }

    /// The slot of the model `id`, if the store has it.
    @inline(__always)
    func slot(of id: String) -> Int? {
        table.value(for: id).map(Int.init)
    }

    subscript(id: String) -> JSONValue? {
        slot(of: id).flatMap { values[$0] }
    }

    /// Puts `value` as the model `id`, returning the model it replaced.
    @discardableResult
    mutating func updateValue(_ value: JSONValue, forKey id: String) -> JSONValue? {
        place(value, forKey: id).replaced
    }

    /// Puts `value` as the model `id`: the id the model goes by, and the model it replaced. Swift
    /// compares strings by canonical equivalence, so an id written another way ("é" as one scalar
    /// or two) names the same model, which keeps the id it was made with.
    mutating func put(_ value: JSONValue, forKey id: String) -> (id: String, replaced: JSONValue?) {
        let (slot, replaced) = place(value, forKey: id)
        return (ids[slot], replaced)
    }

    /// The id the model `id` goes by (see `put`): `id` itself unless a model goes by another way
    /// of writing it (an ASCII id too: a model made as `tile` and the Kelvin sign is `tileK`).
    func storedID(_ id: String) -> String {
        slot(of: id).map { ids[$0] } ?? id
    }

    /// The id of the model in `slot`.
    func id(at slot: Int) -> String { ids[slot] }

    /// Puts `value` as the model `id`, last changed at `version` (a store restored from disk).
    mutating func updateValue(_ value: JSONValue, forKey id: String, version: UInt64) {
        versions[place(value, forKey: id).slot] = version
    }

    /// Puts `value` as the model `id`: where, and what it replaced. One hash of the id, whether
    /// the model is new or not (a lookup and then an insert hashed a new one twice).
    private mutating func place(_ value: JSONValue, forKey id: String) -> (slot: Int, replaced: JSONValue?) {
        precondition(values.count < Int(Int32.max), "a store holds at most 2^31 models")
        let candidate = free.last ?? Int32(values.count)
        if let existing = table.value(for: id, orInsert: candidate) {
            var replaced: JSONValue? = value
            swap(&replaced, &values[Int(existing)])
            return (Int(existing), replaced)
        }
        let slot = Int(candidate)
        if slot < values.count {
            free.removeLast()
            ids[slot] = id
            values[slot] = value
            versions[slot] = 0
        } else {
            ids.append(id)
            values.append(value)
            versions.append(0)
        }
        count += 1
        return (slot, nil)
    }

    /// Removes the model `id`, returning it.
    @discardableResult
    mutating func removeValue(forKey id: String) -> JSONValue? {
        guard let slot = table.remove(id) else { return nil }
        let index = Int(slot)
        let old = values[index]
        values[index] = nil
        versions[index] = 0
        ids[index] = ""
        free.append(slot)
        count -= 1
        return old
    }

    /// Runs `body` on the model `id`, in place, if there is one.
    mutating func modify(_ id: String, _ body: (inout JSONValue) -> Void) {
        guard let slot = slot(of: id), values[slot] != nil else { return }
        body(&values[slot]!)
    }

    /// Every model by id (a snapshot's form).
    var dictionary: [String: JSONValue] {
        var models: [String: JSONValue] = [:]
        models.reserveCapacity(count)
        for (slot, value) in values.enumerated() {
            if let value { models[ids[slot]] = value }
        }
        return models
    }

    /// Every model whose last change is after `version`, with its tag.
    func changed(after version: UInt64) -> [(id: String, value: JSONValue, tag: UInt64)] {
        var models: [(id: String, value: JSONValue, tag: UInt64)] = []
        for slot in versions.indices where versions[slot] > version {
            if let value = values[slot] { models.append((ids[slot], value, versions[slot])) }
        }
        return models
    }

    var modelIDs: [String] {
        values.indices.compactMap { values[$0] == nil ? nil : ids[$0] }
    }
}
