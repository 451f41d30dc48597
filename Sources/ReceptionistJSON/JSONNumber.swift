/// A JSON number exactly as it was written: its literal text (RFC 8259 grammar), never rounded
/// through a `Double`. An integer of any size, `1.10` or `1e400` comes back out as it went in;
/// `-0.0` stays `-0.0`.
///
/// Two numbers are equal when their literals are: `1` and `1.0` are different values, as they are
/// different text. Code that must compute with a number (a version, a rate) asks for
/// `doubleValue` or `uint64Value` at that moment.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    /// The number's text, valid by the RFC 8259 grammar.
    public let literal: String

    /// `literal` must already be valid number text (the parser's job).
    init(validLiteral literal: String) {
        self.literal = literal
    }

    /// An `Int`, the integer jobs write most: without the generic path, which a caller in
    /// another module runs unspecialised (a witness call for every test of the value's width).
    public init(_ value: Int) {
        literal = Self.decimal(Int64(value))
    }

    /// An integer, written in full.
    public init<T: BinaryInteger>(_ value: T) {
        if let small = Int64(exactly: value) {
            literal = Self.decimal(small)
        } else {
            literal = String(value)
        }
    }

    /// The decimal text of `value`, built in a stack buffer: the generic `String(_:)` for
    /// integers is several times slower, and jobs write numbers into models on every change.
    private static func decimal(_ value: Int64) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var magnitude = value.magnitude
            var index = 20
            repeat {
                index -= 1
                buffer[index] = UInt8(truncatingIfNeeded: magnitude % 10) &+ UInt8(ascii: "0")
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "-")
            }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[index..<20]), as: UTF8.self)
        }
    }

    /// A `Double`: integral values within ±2^53 without a fraction, others in Swift's shortest
    /// round-tripping form. A non-finite value has no JSON form and is written as `null`.
    public init(_ value: Double) {
        if value.isFinite, value == value.rounded(), abs(value) <= 9_007_199_254_740_992 {
            literal = String(Int64(value))
        } else if value.isFinite {
            literal = "\(value)"
        } else {
            literal = "null"
        }
    }

    public init(integerLiteral value: Int) { self.init(value) }
    public init(floatLiteral value: Double) { self.init(value) }

    /// The nearest `Double` (infinite for a literal beyond its range, such as `1e400`).
    public var doubleValue: Double { Double(literal) ?? .nan }

    /// The value as an unsigned integer, when the literal is one (no fraction, no exponent, no sign).
    public var uint64Value: UInt64? { UInt64(literal) }

    public var description: String { literal }
}
