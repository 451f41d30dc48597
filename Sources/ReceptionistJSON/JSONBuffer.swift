/// Compact JSON text written into memory the buffer owns and grows: what `JSONWriter` writes, for
/// a writer that encodes a great many small values in a row (the disk engine's change sets).
/// Each append is a bounds check and a copy, without an array's uniqueness and capacity
/// bookkeeping, which cost more than the bytes themselves on such values.
///
/// One thread at a time; not `Sendable`.
public final class JSONBuffer {
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    @usableFromInline var used = 0
    public var count: Int { used }
    /// Bytes of memory the buffer holds.
    public var allocatedCount: Int { capacity }

    public init(capacity: Int = 256) {
        self.capacity = max(16, capacity)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// Forgets the text, keeping the memory.
    public func removeAll() { used = 0 }

    public var last: UInt8? { used > 0 ? base[used - 1] : nil }

    public func removeLast() {
        precondition(used > 0, "nothing to remove")
        used -= 1
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: used))
    }

    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: used)) }

    /// Room for `more` bytes past the text.
    @inlinable func reserve(_ more: Int) {
        if used + more > capacity { grow(to: used + more) }
    }

    @usableFromInline func grow(to needed: Int) {
        var grown = capacity * 2
        while grown < needed { grown *= 2 }
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        larger.update(from: base, count: used)
        base.deallocate()
        base = larger
        capacity = grown
    }

    /// `value` in decimal, written in place: its digits counted first (in four comparisons),
    /// then written from the last, two at a time.
    public func append(decimal value: Int64) {
        let magnitude = value.magnitude
        let digits = Self.digitCount(magnitude)
        let sign = value < 0 ? 1 : 0
        reserve(digits + sign)
        if sign == 1 { base[used] = UInt8(ascii: "-") }
        used += sign + digits
        Self.writeDigits(magnitude, endingAt: base + used)
    }

    /// Writes `magnitude`'s decimal digits (`digitCount` of them) so that the last is just before
    /// `end`: from the last, two at a time.
    static func writeDigits(_ magnitude: UInt64, endingAt end: UnsafeMutablePointer<UInt8>) {
        var rest = magnitude
        var index = 0
        let pairs = digitPairs.utf8Start
        while rest >= 100 {
            let pair = Int(truncatingIfNeeded: rest % 100) &* 2
            rest /= 100
            index -= 2
            end[index] = pairs[pair]
            end[index + 1] = pairs[pair + 1]
        }
        if rest >= 10 {
            let pair = Int(truncatingIfNeeded: rest) &* 2
            end[index - 2] = pairs[pair]
            end[index - 1] = pairs[pair + 1]
        } else {
            end[index - 1] = UInt8(truncatingIfNeeded: rest) &+ UInt8(ascii: "0")
        }
    }

    /// Decimal digits of `value` (1 for 0).
    static func digitCount(_ value: UInt64) -> Int {
        var rest = value
        var digits = 1
        // Each step leaves `rest` below the next one's bound: 10^10, then 10^5, then 10^3.
        if rest >= 10_000_000_000 { digits &+= 10; rest /= 10_000_000_000 }
        if rest >= 100_000 { digits &+= 5; rest /= 100_000 }
        if rest >= 1_000 { digits &+= 3; rest /= 1_000 }
        if rest >= 100 { digits &+= 2 } else if rest >= 10 { digits &+= 1 }
        return digits
    }

    /// "00" to "99", each pair's two digits: a literal in the binary, read through its pointer,
    /// with no lazy initialisation and no array to check.
    private static var digitPairs: StaticString {
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
    }

    @inlinable public func append(_ byte: UInt8) {
        reserve(1)
        base[used] = byte
        used += 1
    }

    @inlinable public func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        (base + used).update(from: source, count: bytes.count)
        used += bytes.count
    }

    /// A literal's bytes (ASCII in practice: keys and punctuation).
    @inlinable public func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0) }
    }

    public func write(_ value: JSONValue) {
        switch value {
        case .null: append("null")
        case .bool(let flag): append(flag ? "true" : "false")
        case .number(let number): number.write(to: self)
        case .string(let text): writeString(text)
        case .array(let elements):
            append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { append(UInt8(ascii: ",")) }
                write(element)
            }
            append(UInt8(ascii: "]"))
        case .object(let members):
            append(UInt8(ascii: "{"))
            for (i, (key, member)) in members.enumerated() {
                if i > 0 { append(UInt8(ascii: ",")) }
                writeString(key)
                append(UInt8(ascii: ":"))
                write(member)
            }
            append(UInt8(ascii: "}"))
        }
    }

    /// `text` quoted, escaped as `JSONWriter.writeString` escapes it. Most strings (ids, keys,
    /// colors) need no escape: their bytes are checked and copied in one pass over the string's
    /// own storage.
    public func writeString(_ text: String) {
        let plain = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            reserve(bytes.count + 2)
            var at = used
            base[at] = UInt8(ascii: "\"")
            at += 1
            for byte in bytes {
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
                base[at] = byte
                at += 1
            }
            base[at] = UInt8(ascii: "\"")
            used = at + 1
            return true
        }
        if plain == true { return }
        var escaped: [UInt8] = []
        JSONWriter.writeString(text, to: &escaped)
        append(escaped)
    }
}
