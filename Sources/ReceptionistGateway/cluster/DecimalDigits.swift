/// Whole numbers written in Redis's replies and in this cluster's notices, read from their bytes.
/// Reading them as `String`s (`split`, `UInt64(_:)`) walks each character: about 10,000
/// instructions for one stream ID, paid for every entry a node reads back.
///
/// Pure.
enum DecimalDigits {
    /// `bytes` as a number: one or more ASCII digits and nothing else, at most `UInt64.max`.
    static func value<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> UInt64? {
        guard !bytes.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (tens, over) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = tens.addingReportingOverflow(UInt64(digit))
            guard !over, !carry else { return nil }
            value = sum
        }
        return value
    }

    /// Two numbers joined by `separator` (a stream ID: `milliseconds-sequence`).
    static func pair<Bytes: Collection<UInt8>>(_ bytes: Bytes, separator: UInt8) -> (UInt64, UInt64)? {
        guard let middle = bytes.firstIndex(of: separator),
              let first = value(bytes[..<middle]), let second = value(bytes[bytes.index(after: middle)...])
        else { return nil }
        return (first, second)
    }
}
