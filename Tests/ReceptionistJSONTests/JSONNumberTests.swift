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
}
