import ReceptionistLoop

/// One entry of a Redis stream: its ID and its fields. Pure value, parsed from replies.
struct StreamEntry: Equatable {
    let id: String
    let fields: [String: [UInt8]]

    /// A field read as a whole number.
    func number(_ field: String) -> UInt64? {
        fields[field].flatMap { UInt64(String(decoding: $0, as: UTF8.self)) }
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
            var fields: [String: [UInt8]] = [:]
            for (name, value) in pairs(flat) { fields[name] = value }
            entries.append(StreamEntry(id: id, fields: fields))
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
