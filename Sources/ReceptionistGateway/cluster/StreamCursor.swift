/// A node's place in one Redis stream whose entries carry consecutive numbers (a store's
/// versions, a topic's sequence numbers), and the verdict on each entry read after it.
///
/// Pure value.
struct StreamCursor: Equatable {
    /// The ID of the last entry read: the next `XREAD` starts after it.
    private(set) var lastID: String
    /// The number of the last entry accepted.
    private(set) var lastNumber: UInt64

    enum Verdict: Equatable {
        /// The next number: apply it.
        case next
        /// Already seen (a re-read after a reconnection): skip it.
        case duplicate
        /// Numbers `from...to` were trimmed from the stream before this node read them.
        case gap(from: UInt64, to: UInt64)
        /// The numbers went back: Redis lost its data and started again.
        case regressed
    }

    /// The ID before every entry: a cursor that names no entry read.
    static let start = "0-0"

    init(lastID: String = start, lastNumber: UInt64 = 0) {
        self.lastID = lastID
        self.lastNumber = lastNumber
    }

    /// Judges the entry `id` numbered `number`, read after `lastID`, and moves past it (a gap or
    /// regression moves the cursor too: what follows is judged from this entry on).
    mutating func accept(id: String, number: UInt64) -> Verdict {
        // An entry at or before the last one read was had already: a read sent before this node
        // mirrored its own publish from Redis's answer returns it again.
        if let entry = Self.order(id), let last = Self.order(lastID), entry <= last { return .duplicate }
        let previous = lastNumber
        lastID = id
        if number == previous + 1 {
            lastNumber = number
            return .next
        }
        if number > previous + 1 {
            lastNumber = number
            return .gap(from: previous + 1, to: number - 1)
        }
        // A stream's IDs only grow, so an entry after `lastID` with an old number means the
        // numbering restarted, unless it is the very entry the cursor already holds.
        if number == previous { return .duplicate }
        lastNumber = number
        return .regressed
    }

    /// The ID just before `id`: a cursor there reads `id` next. Nil for `0-0` or a malformed ID.
    static func before(_ id: String) -> String? {
        guard let (milliseconds, sequence) = order(id) else { return nil }
        if sequence > 0 { return "\(milliseconds)-\(sequence - 1)" }
        guard milliseconds > 0 else { return nil }
        return "\(milliseconds - 1)-\(UInt64.max)"
    }

    /// A stream entry ID (`milliseconds-sequence`) as numbers, which order as the IDs do.
    static func order(_ id: String) -> (UInt64, UInt64)? {
        var id = id
        return id.withUTF8 { DecimalDigits.pair($0, separator: UInt8(ascii: "-")) }
    }
}
