/// A table from model id to an `Int32`: the store's model slots and the coalescing buffer's
/// pending changes, both looked up once per committed change.
///
/// A `Dictionary<String, _>` hashes its key with SipHash through `Hasher` (seed, bytes, a
/// terminator, finalisation), which for a short id costs several times what the rest of the
/// lookup does, and the buffer looks up every change a job commits. This table hashes the id's
/// bytes eight at a time from a per-process random basis (so that ids cannot be chosen to
/// collide in every process) and probes linearly in a power-of-two array of cells. Each key's
/// hash is kept beside it: a probe that meets another key compares hashes, not strings (a
/// string comparison that is not of identical bits is a call into the standard library).
///
/// Only ASCII ids go there. Swift compares strings by canonical equivalence (`"é"` as one scalar
/// equals `"e"` and a combining accent), which a hash of the bytes cannot follow, and the store
/// keys its models the way Swift compares; so an id with any other byte goes to `others`, a
/// `Dictionary`, which hashes as the store does. For ASCII, bytes equal is strings equal. But
/// three scalars are canonically ASCII (`asciiTwin`): an id made of them and ASCII is looked up
/// as the ASCII id it equals.
///
/// Invariants: at most half the cells are used, so a probe always ends at an empty cell; a
/// cell holds an index into `keys`, `hashes` and `values`, or `empty`; `hashes[i]` is the hash of
/// `keys[i]`; every key is reached from its home cell (its hash) through used cells only, which
/// removal keeps by moving later cells back.
struct ModelTable {
    private var cells: [Int32] = []
    private var keys: [String] = []
    private var hashes: [UInt64] = []
    private var values: [Int32] = []
    private var others: [String: Int32] = [:]

    private static let empty: Int32 = -1
    /// Fixed for the process: a table is never shared between processes.
    private static let processBasis: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64.random(in: .min ... .max)
    /// `processBasis`, read once per table: a global's every read goes through `swift_once`,
    /// a call on each lookup.
    private let basis = ModelTable.processBasis

    var isEmpty: Bool { keys.isEmpty && others.isEmpty }
    var count: Int { keys.count + others.count }

    /// The value for `id`, if it is in the table.
    func value(for id: String) -> Int32? {
        guard let hash = hashValue(of: id) else { return Self.asciiTwin(of: id).map { value(for: $0) } ?? others[id] }
        return cell(of: id, hash: hash).map { values[Int(cells[$0])] }
    }

    /// The cell that holds the ASCII `id`, whose hash is `hash`, if the table has it.
    @inline(__always)
    private func cell(of id: String, hash: UInt64) -> Int? {
        guard !cells.isEmpty else { return nil }
        let mask = cells.count - 1
        var cell = Int(truncatingIfNeeded: hash) & mask
        while true {
            let entry = cells[cell]
            if entry == Self.empty { return nil }
            if hashes[Int(entry)] == hash && keys[Int(entry)] == id { return cell }
            cell = (cell + 1) & mask
        }
    }

    /// Sets the value for `id`, adding it if it is not there.
    mutating func set(_ value: Int32, for id: String) {
        guard let hash = hashValue(of: id) else {
            if let twin = Self.asciiTwin(of: id) { return set(value, for: twin) }
            others[id] = value
            return
        }
        let (index, inserted) = entry(of: id, hash: hash, orInsert: value)
        if !inserted { values[index] = value }
    }

    /// The value for `id` if it is in the table; if not, adds it with `value` and returns nil.
    /// One hash where a lookup and then a `set` would take two.
    mutating func value(for id: String, orInsert value: Int32) -> Int32? {
        guard let hash = hashValue(of: id) else {
            if let twin = Self.asciiTwin(of: id) { return self.value(for: twin, orInsert: value) }
            if let existing = others[id] { return existing }
            others[id] = value
            return nil
        }
        let (index, inserted) = entry(of: id, hash: hash, orInsert: value)
        return inserted ? nil : values[index]
    }

    /// The ASCII id Swift takes as equal to `id`, if there is one. Unicode maps three scalars
    /// canonically onto ASCII (U+212A KELVIN SIGN onto `K`, U+037E GREEK QUESTION MARK onto `;`,
    /// U+1FEF GREEK VARIA onto a backtick), so an id of those and ASCII only equals an ASCII id,
    /// and must be found where that one is. Asked of ids with a byte past ASCII only.
    static func asciiTwin(of id: String) -> String? {
        var scalars = String.UnicodeScalarView()
        for scalar in id.unicodeScalars {
            switch scalar.value {
            case 0..<0x80: scalars.append(scalar)
            case 0x212A: scalars.append("K")
            case 0x037E: scalars.append(";")
            case 0x1FEF: scalars.append("`")
            default: return nil
            }
        }
        return String(scalars)
    }

    /// Where the ASCII `id`, whose hash is `hash`, sits in `keys` and `values`; added there with
    /// `value` if it was not in the table.
    @inline(__always)
    private mutating func entry(of id: String, hash: UInt64, orInsert value: Int32) -> (index: Int, inserted: Bool) {
        if (keys.count + 1) * 2 > cells.count { grow() }
        let mask = cells.count - 1
        var cell = Int(truncatingIfNeeded: hash) & mask
        while true {
            let entry = cells[cell]
            if entry == Self.empty {
                precondition(keys.count < Int(Int32.max), "a model table holds at most 2^31 ids")
                cells[cell] = Int32(keys.count)
                keys.append(id)
                hashes.append(hash)
                values.append(value)
                return (keys.count - 1, true)
            }
            if hashes[Int(entry)] == hash && keys[Int(entry)] == id { return (Int(entry), false) }
            cell = (cell + 1) & mask
        }
    }

    /// Removes `id`, returning its value if it was there.
    @discardableResult
    mutating func remove(_ id: String) -> Int32? {
        guard let hash = hashValue(of: id) else { return Self.asciiTwin(of: id).map { remove($0) } ?? others.removeValue(forKey: id) }
        guard var hole = cell(of: id, hash: hash) else { return nil }
        let mask = cells.count - 1
        let entry = Int(cells[hole])
        let removed = values[entry]
        // Backward shift: each later cell of the run whose home is not between the hole and
        // itself moves into the hole, so no key is left behind an empty cell.
        var next = (hole + 1) & mask
        while cells[next] != Self.empty {
            let home = Int(truncatingIfNeeded: hashes[Int(cells[next])]) & mask
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                cells[hole] = cells[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        cells[hole] = Self.empty
        // `keys` and `values` stay dense: the last entry takes the removed one's place.
        let last = keys.count - 1
        if entry != last {
            var cell = Int(truncatingIfNeeded: hashes[last]) & mask
            while cells[cell] != Int32(last) { cell = (cell + 1) & mask }
            cells[cell] = Int32(entry)
            keys.swapAt(entry, last)
            hashes.swapAt(entry, last)
            values.swapAt(entry, last)
        }
        keys.removeLast()
        hashes.removeLast()
        values.removeLast()
        return removed
    }

    /// Empties the table; keeps its cells unless they are far more than its last use needed.
    mutating func removeAll() {
        if cells.count > 64 && keys.count * 8 < cells.count {
            cells = []
        } else if !keys.isEmpty {
            for index in cells.indices { cells[index] = Self.empty }
        }
        keys.removeAll(keepingCapacity: true)
        hashes.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
        if !others.isEmpty { others.removeAll() }
    }

    /// Room for `count` ids without growing (a store restored whole).
    mutating func reserveCapacity(_ count: Int) {
        keys.reserveCapacity(count)
        hashes.reserveCapacity(count)
        values.reserveCapacity(count)
        var size = max(16, cells.count)
        while size < count * 2 { size *= 2 }
        if size > cells.count {
            // `grow` doubles the cells and places every key again: start it at half the size wanted.
            cells = Array(repeating: Self.empty, count: size / 2)
            grow()
        }
    }

    private mutating func grow() {
        let size = max(16, cells.count * 2)
        cells = Array(repeating: Self.empty, count: size)
        let mask = size - 1
        for (index, hash) in hashes.enumerated() {
            var cell = Int(truncatingIfNeeded: hash) & mask
            while cells[cell] != Self.empty { cell = (cell + 1) & mask }
            cells[cell] = Int32(index)
        }
    }

    /// The id's length, then its UTF-8 bytes read eight at a time (a shorter id and the last part
    /// in overlapping loads, so every byte is read and none past the end), each word folded in by
    /// a multiply and a shift, then a final mix so that the low bits (the ones a cell index keeps)
    /// depend on every byte; nil if the id is not all ASCII. Byte by byte (FNV-1a) it took ~7
    /// instructions a byte, ~250 for a UUID.
    // Asked to be inlined into each lookup: called, it took its argument as a copy, a retain and
    // a release of every id a commit validates. (`validate`'s loop still calls it; the id it
    // passes is read in place, and an id of up to 15 bytes holds no heap object to count.)
    @inline(__always)
    func hashValue(of id: String) -> UInt64? {
        let digest = id.utf8.withContiguousStorageIfAvailable { bytes -> UInt64? in
            let count = bytes.count
            guard let base = bytes.baseAddress, count > 0 else { return basis }
            let raw = UnsafeRawPointer(base)
            // The length goes in first: the loads of a short id repeat bytes ("ab" reads a, b, b).
            var hash = basis ^ UInt64(truncatingIfNeeded: count)
            var high: UInt64 = 0
            @inline(__always) func fold(_ word: UInt64) {
                high |= word
                hash = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
                hash ^= hash >> 29
            }
            if count >= 8 {
                var offset = 0
                while offset + 8 < count {
                    fold(raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                    offset += 8
                }
                fold(raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
            } else if count >= 4 {
                let first = UInt64(raw.loadUnaligned(as: UInt32.self))
                let last = UInt64(raw.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
                fold(first | last << 32)
            } else {
                fold(UInt64(base[0]) | UInt64(base[count / 2]) << 8 | UInt64(base[count - 1]) << 16)
            }
            return high & 0x8080_8080_8080_8080 == 0 ? hash : nil
        }
        guard let digest else {
            // Only a bridged string keeps its bytes apart; a native copy has them together.
            var native = id
            native.makeContiguousUTF8()
            return hashValue(of: native)
        }
        guard var hash = digest else { return nil }
        hash ^= hash >> 32
        hash &*= 0xD6E8_FEB8_6659_FD93
        hash ^= hash >> 32
        return hash
    }
}
