/// A JSON number exactly as it was written: its literal text (RFC 8259 grammar), never rounded
/// through a `Double`. An integer of any size, `1.10` or `1e400` comes back out as it went in;
/// `-0.0` stays `-0.0`.
///
/// Two numbers are equal when their literals are: `1` and `1.0` are different values, as they are
/// different text. Code that must compute with a number (a version, a rate) asks for
/// `doubleValue` or `uint64Value` at that moment.
///
/// An integer is held as an `Int64`, not as text. Jobs write integers into models on every
/// change: building a literal's string cost a committing thread more than the store's own work
/// on a change, and every copy of the value then retained and released it.
///
/// Invariant: a literal that is the canonical decimal text of an `Int64` (no sign but `-`, no
/// leading zero, not `-0`) is always held as `.integer`, and only such a literal is; every
/// initialiser goes through `init(validLiteral:)`'s test or builds `.integer` from an integer.
/// So equal literals are equal storage, and the synthesised `==` and `hash` compare literals.
/// Checked by `JSONNumberTests.equalLiteralsAreEqualNumbersHoweverBuilt`.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    private enum Storage: Sendable, Hashable {
        case integer(Int64)
        case text(String)
    }

    private let storage: Storage

    /// About how many bytes `literal` takes, without making it: an integer at most 20, a literal
    /// kept as text its length.
    public var approximateBytes: Int {
        switch storage {
        case .integer: 20
        case .text(let text): text.utf8.count
        }
    }

    /// The number's text, valid by the RFC 8259 grammar.
    public var literal: String {
        switch storage {
        case .integer(let value): Self.decimal(value)
        case .text(let text): text
        }
    }

    /// `bytes` must already be valid number text (the parser's job). An integer's builds no string.
    init(validLiteral bytes: UnsafeBufferPointer<UInt8>) {
        if let integer = Self.canonicalInteger(bytes) {
            storage = .integer(integer)
        } else {
            storage = .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// An `Int`, the integer jobs write most: without the generic path, which a caller in
    /// another module runs unspecialised (a witness call for every test of the value's width).
    public init(_ value: Int) {
        storage = .integer(Int64(value))
    }

    /// A `UInt64`, the versions and times the disk engine writes for every change set: without
    /// the generic path, as `init(_: Int)`.
    public init(_ value: UInt64) {
        storage = value <= UInt64(Int64.max) ? .integer(Int64(value)) : .text(String(value))
    }

    /// An integer, written in full.
    public init<T: BinaryInteger>(_ value: T) {
        if let small = Int64(exactly: value) {
            storage = .integer(small)
        } else {
            // Beyond `Int64`, so never the canonical text of one.
            storage = .text(String(value))
        }
    }

    /// A `Double`: integral values within ±2^53 without a fraction, others in Swift's shortest
    /// round-tripping form. A non-finite value has no JSON form and is written as `null`.
    public init(_ value: Double) {
        if value.isFinite, value == value.rounded(), abs(value) <= 9_007_199_254_740_992 {
            storage = .integer(Int64(value))
        } else if value.isFinite {
            // Has a fraction or an exponent (`1e+20`), so never an integer's canonical text.
            storage = .text("\(value)")
        } else {
            storage = .text("null")
        }
    }

    public init(integerLiteral value: Int) { self.init(value) }
    public init(floatLiteral value: Double) { self.init(value) }

    /// The nearest `Double` (infinite for a literal beyond its range, such as `1e400`).
    public var doubleValue: Double {
        switch storage {
        case .integer(let value): Double(value)
        case .text(let text): Double(text) ?? .nan
        }
    }

    /// The value as an unsigned integer, when the literal is one (no fraction, no exponent, no sign).
    public var uint64Value: UInt64? {
        switch storage {
        case .integer(let value): value >= 0 ? UInt64(value) : nil
        case .text(let text): UInt64(text)
        }
    }

    public var description: String { literal }

    /// Appends the literal's UTF-8 bytes, an integer's without building its string.
    public func write(to out: inout [UInt8]) {
        switch storage {
        case .integer(let value):
            JSONWriter.writeDecimal(value.magnitude, negative: value < 0, to: &out)
        case .text(let text):
            out.append(contentsOf: text.utf8)
        }
    }

    /// Appends the literal's UTF-8 bytes to `buffer`, as `write(to:)` does.
    public func write(to buffer: JSONBuffer) {
        switch storage {
        case .integer(let value):
            buffer.append(decimal: value)
        case .text(let text):
            var text = text
            text.withUTF8 { buffer.append($0) }
        }
    }

    /// The integer whose canonical decimal text `bytes` is, or nil: a sign only as `-`, no
    /// leading zero, not `-0`, and within `Int64`.
    static func canonicalInteger(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        var index = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { index = 1 }
        let digits = bytes.count - index
        // 19 digits hold every Int64; a leading zero is canonical only as `0` itself.
        guard digits >= 1, digits <= 19 else { return nil }
        if bytes[index] == UInt8(ascii: "0") && (digits > 1 || negative) { return nil }
        var magnitude: UInt64 = 0
        while index < bytes.count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit <= 9 else { return nil }
            magnitude = magnitude &* 10 &+ UInt64(digit)
            index += 1
        }
        // 19 digits stay below 2^64, so the sum did not wrap.
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// The decimal text of `value`.
    private static func decimal(_ value: Int64) -> String {
        var out: [UInt8] = []
        JSONWriter.writeDecimal(value.magnitude, negative: value < 0, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
