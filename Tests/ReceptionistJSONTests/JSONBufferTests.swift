@testable import ReceptionistJSON
import Testing

@Suite struct JSONBufferTests {
    /// The buffer writes what `JSONWriter` writes, byte for byte, for every kind of value.
    @Test func writesWhatTheWriterWrites() throws {
        let texts = [
            "0", "-1", "9223372036854775807", "-9223372036854775808", "18446744073709551616", "1.10", "-0.0", "1e400",
            "\"\"", "\"plain\"", "\"quote \\\" back \\\\ slash\"", "\"line\\nbreak\\ttab\\u0001\"", "\"é ✓ 😀\"",
            "\"a string of more than fifteen bytes, held apart from the String itself\"",
            "true", "false", "null", "[]", "{}", "[1,[2,[3]],{\"k\":\"v\"}]",
            "{\"style\":{\"border\":{\"width\":1}},\"x.y\":null,\"tags\":[\"a\",\"b\\\"\"]}",
        ]
        for text in texts {
            let value = try JSONParser.parse(text)
            let buffer = JSONBuffer(capacity: 1)
            buffer.write(value)
            #expect(buffer.bytes == JSONWriter.encode(value), "\(text)")
        }
    }

    /// Every power of ten and its neighbours, both signs, and values from a fixed-seed generator:
    /// the digit count and the digits, against Swift's own text.
    @Test func decimalsAtEveryDigitCountBoundary() {
        var values: [Int64] = [Int64.max, Int64.min, Int64.min + 1]
        var power: Int64 = 1
        for _ in 0..<19 {
            values += [power - 1, power, power + 1, -(power - 1), -power, -(power + 1)]
            if power <= Int64.max / 10 { power *= 10 }
        }
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2000 {
            seed ^= seed << 13
            seed ^= seed >> 7
            seed ^= seed << 17
            values.append(Int64(bitPattern: seed) >> Int64(seed % 63))
        }
        for value in values {
            let buffer = JSONBuffer(capacity: 1)
            buffer.append(decimal: value)
            #expect(buffer.bytes == Array(String(value).utf8), "\(value)")
            #expect(JSONBuffer.digitCount(value.magnitude) == String(value.magnitude).count, "\(value)")
        }
    }

    /// `JSONWriter.writeDecimal` after what the array holds, at every digit count and at UInt64's
    /// ends.
    @Test func unsignedDecimalsAppendedToAnArray() {
        // Every value of up to three digits (appended one digit at a time), and past them.
        var values: [UInt64] = Array(0...1_100) + [UInt64.max, UInt64.max - 1]
        var power: UInt64 = 1
        for _ in 0..<20 {
            values += [power - 1, power, power + 1]
            if power <= UInt64.max / 10 { power *= 10 }
        }
        for value in values {
            var out = Array("x:".utf8)
            JSONWriter.writeDecimal(value, to: &out)
            #expect(out == Array("x:\(value)".utf8), "\(value)")
            #expect(JSONWriter.decimalCount(value) == String(value).count, "\(value)")
            // Into memory: exactly its digits, and not a byte past them.
            var memory = [UInt8](repeating: UInt8(ascii: "#"), count: 24)
            let written = memory.withUnsafeMutableBufferPointer { JSONWriter.writeDecimal(value, at: $0.baseAddress! + 1) }
            #expect(written == String(value).count)
            #expect(memory == Array(("#" + String(value)).utf8) + Array(repeating: UInt8(ascii: "#"), count: 23 - written))
        }
    }

    /// Integers in place, at every width, with a sign; the buffer grows past its first capacity.
    @Test func decimalsAndGrowth() {
        let values: [Int64] = [0, 9, 10, 99, 100, -1, -10, 1_000_000_007, Int64.max, Int64.min, -999_999_999_999_999_999]
        let buffer = JSONBuffer(capacity: 16)
        var expected: [UInt8] = []
        for _ in 0..<40 {
            for value in values {
                buffer.append(decimal: value)
                buffer.append(UInt8(ascii: ","))
                expected += String(value).utf8
                expected.append(UInt8(ascii: ","))
            }
        }
        #expect(buffer.bytes == expected)
        #expect(buffer.last == UInt8(ascii: ","))
        buffer.removeLast()
        #expect(buffer.count == expected.count - 1)
        buffer.removeAll()
        #expect(buffer.count == 0 && buffer.last == nil)
    }
}
