import ReceptionistLoop

/// One entry of a Redis stream: its ID and its fields. Pure value, parsed from replies.
struct StreamEntry: Equatable {
    let id: String
    /// The fields as Redis sent them: name, value, name, value, … An entry has a few, so a field
    /// is found by looking through them, not by hashing names into a dictionary for every entry
    /// read back.
    private let flat: [RedisReply]

    init(id: String, flat: [RedisReply]) {
        self.id = id
        self.flat = flat
    }

    /// A field's value; nil when the entry has no such field.
    func field(_ name: String) -> [UInt8]? {
        var index = 0
        while index + 1 < flat.count {
            if case .string(let bytes) = flat[index], bytes.elementsEqual(name.utf8) { return flat[index + 1].bytes }
            index += 2
        }
        return nil
    }

    /// A field read as a whole number.
    func number(_ name: String) -> UInt64? {
        field(name).flatMap(DecimalDigits.value)
    }

    /// The entries of an `XREAD` reply for one stream: `[[key, [[id, [field, value, …]], …]]]`.
    static func parse(xread reply: RedisReply) -> [StreamEntry] {
        guard let streams = reply.elements, let stream = streams.first?.elements, stream.count == 2 else { return [] }
        return parse(range: stream[1])
    }

    /// The entries of an `XRANGE` or `XREVRANGE` reply, in its order: `[[id, [field, value, …]], …]`.
    static func parse(range reply: RedisReply) -> [StreamEntry] {
        guard let items = reply.elements else { return [] }
        var entries: [StreamEntry] = []
        entries.reserveCapacity(items.count)
        for item in items {
            guard let parts = item.elements, parts.count == 2, let id = parts[0].text, let flat = parts[1].elements else { continue }
            entries.append(StreamEntry(id: id, flat: flat))
        }
        return entries
    }

    /// A flat `[name, value, name, value, …]` reply (fields, `HGETALL`) as pairs; malformed
    /// elements are skipped.
    static func pairs(_ flat: [RedisReply]) -> [(String, [UInt8])] {
        var pairs: [(String, [UInt8])] = []
        pairs.reserveCapacity(flat.count / 2)
        var index = 0
        while index + 1 < flat.count {
            if let name = flat[index].text, let value = flat[index + 1].bytes { pairs.append((name, value)) }
            index += 2
        }
        return pairs
    }
}
