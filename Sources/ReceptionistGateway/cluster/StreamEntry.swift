import ReceptionistLoop

/// One entry of a Redis stream: its ID and its fields. Pure value, parsed from replies.
struct StreamEntry: Equatable {
    struct Field: Equatable {
        let name: String
        let value: [UInt8]
    }

    let id: String
    /// In the order Redis sent them. An entry has a few, so a field is found by looking through
    /// them, not by hashing names into a dictionary for every entry read back.
    let fields: [Field]

    /// A field's value; nil when the entry has no such field.
    func field(_ name: String) -> [UInt8]? {
        fields.first { $0.name == name }?.value
    }

    /// A field read as a whole number.
    func number(_ name: String) -> UInt64? {
        field(name).flatMap(DecimalDigits.value)
    }

    /// The entries of an `XREAD` reply for one stream: `[[key, [[id, [field, value, …]], …]]]`.
    /// Read in place (`RedisReplyView`) for the reads that follow every notice, or from a copy.
    static func parse<Reply: RedisReplyReading>(xread reply: Reply) -> [StreamEntry] {
        guard let streams = reply.elements, let stream = streams.first?.elements, stream.count == 2 else { return [] }
        return parse(range: stream[stream.startIndex + 1])
    }

    /// The entries of an `XRANGE` or `XREVRANGE` reply, in its order: `[[id, [field, value, …]], …]`.
    static func parse<Reply: RedisReplyReading>(range reply: Reply) -> [StreamEntry] {
        guard let items = reply.elements else { return [] }
        var entries: [StreamEntry] = []
        entries.reserveCapacity(items.count)
        for item in items {
            guard let parts = item.elements, parts.count == 2, let id = parts[0].text, let flat = parts[1].elements else { continue }
            entries.append(StreamEntry(id: id, fields: pairs(flat)))
        }
        return entries
    }

    /// A flat `[name, value, name, value, …]` reply (fields, `HGETALL`) as pairs; malformed
    /// elements are skipped.
    static func pairs<Flat: RandomAccessCollection>(_ flat: Flat) -> [Field] where Flat.Element: RedisReplyReading, Flat.Index == Int {
        var pairs: [Field] = []
        pairs.reserveCapacity(flat.count / 2)
        var index = flat.startIndex
        while index + 1 < flat.endIndex {
            if let name = flat[index].text, let value = flat[index + 1].bytes { pairs.append(Field(name: name, value: value)) }
            index += 2
        }
        return pairs
    }
}
