import ReceptionistJSON
import Testing

@Suite struct JSONNumberTests {
    @Test func integersAreWrittenInFull() {
        let values: [Int64] = [0, 7, -1, 10, -10, 42, 1_000_000, Int64.max, Int64.min, -9_007_199_254_740_993]
        for value in values {
            #expect(JSONNumber(value).literal == String(value))
        }
        for value in [0, 9, -9, 123_456_789, Int.max, Int.min] {
            #expect(JSONNumber(value).literal == String(value))
        }
        #expect(JSONNumber(UInt64.max).literal == "18446744073709551615")
        #expect(JSONNumber(UInt8(255)).literal == "255")
        #expect(JSONNumber(-0.0 as Double).literal == "0")
    }

    /// Integers are held as `Int64` and other literals as text, so a literal must always take the
    /// same form, however the number was made, or equal numbers would compare unequal.
    @Test func equalLiteralsAreEqualNumbersHoweverBuilt() throws {
        func parsed(_ literal: String) throws -> JSONNumber {
            guard case .number(let number) = try JSONParser.parse(literal) else {
                Issue.record("\(literal) is not a number")
                return JSONNumber(0)
            }
            return number
        }
        let built: [(JSONNumber, String)] = [
            (JSONNumber(5), "5"), (JSONNumber(5.0), "5"), (JSONNumber(UInt8(5)), "5"), (JSONNumber(Int64(-7)), "-7"),
            (JSONNumber(-0.0 as Double), "0"), (JSONNumber(Int64.min), "-9223372036854775808"),
            (JSONNumber(Int64.max), "9223372036854775807"), (JSONNumber(UInt64(Int64.max) + 1), "9223372036854775808"),
            (JSONNumber(UInt64.max), "18446744073709551615"), (JSONNumber(0.5), "0.5"),
        ]
        for (number, literal) in built {
            let other = try parsed(literal)
            #expect(number == other, "\(literal)")
            #expect(number.hashValue == other.hashValue, "\(literal)")
            #expect(other.literal == literal)
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let value = Int64.random(in: .min ... .max, using: &generator) >> Int64.random(in: 0...63, using: &generator)
            let number = try parsed(String(value))
            #expect(number == JSONNumber(value))
            #expect(number.hashValue == JSONNumber(value).hashValue)
        }
    }

    /// Every literal comes back out byte for byte, integer or not, and numbers that differ as
    /// text stay different.
    @Test func literalsRoundTripAndDifferentTextIsADifferentNumber() throws {
        let literals = [
            "0", "-0", "7", "-1", "10", "1.0", "-0.0", "1e3", "1E+3", "2.5e-7", "9223372036854775807",
            "-9223372036854775808", "9223372036854775808", "-9223372036854775809", "12345678901234567890123",
            "1000000000000000000", "9999999999999999999",
        ]
        var seen: [JSONNumber: String] = [:]
        for literal in literals {
            let value = try JSONParser.parse(literal)
            #expect(JSONWriter.string(value) == literal)
            guard case .number(let number) = value else {
                Issue.record("\(literal) is not a number")
                continue
            }
            #expect(number.literal == literal)
            #expect(seen[number] == nil, "\(literal) equals \(seen[number] ?? "")")
            seen[number] = literal
        }
        #expect(try JSONParser.parse("-9223372036854775808") == .number(JSONNumber(Int64.min)))
        #expect(try JSONParser.parse("42").uint64Value == 42)
        #expect(try JSONParser.parse("-42").uint64Value == nil)
        #expect(try JSONParser.parse("-42").numberValue == -42)
    }
}
