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
    private var free: [Int32] = []
    private(set) var count = 0

    init() {}

    init(_ models: [String: JSONValue]) {
        for (id, value) in models { updateValue(value, forKey: id) }
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
        if let slot = slot(of: id) {
            var replaced: JSONValue? = value
            swap(&replaced, &values[slot])
            return replaced
        }
        if let slot = free.popLast() {
            ids[Int(slot)] = id
            values[Int(slot)] = value
            table.set(slot, for: id)
        } else {
            precondition(values.count < Int(Int32.max), "a store holds at most 2^31 models")
            table.set(Int32(values.count), for: id)
            ids.append(id)
            values.append(value)
        }
        count += 1
        return nil
    }

    /// Removes the model `id`, returning it.
    @discardableResult
    mutating func removeValue(forKey id: String) -> JSONValue? {
        guard let slot = table.remove(id) else { return nil }
        let index = Int(slot)
        let old = values[index]
        values[index] = nil
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

    var modelIDs: [String] {
        values.indices.compactMap { values[$0] == nil ? nil : ids[$0] }
    }
}
