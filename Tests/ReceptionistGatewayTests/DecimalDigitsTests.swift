@testable import ReceptionistGateway
import Testing

@Suite struct DecimalDigitsTests {
    @Test func digitsAloneAreANumber() {
        #expect(DecimalDigits.value(Array("0".utf8)) == 0)
        #expect(DecimalDigits.value(Array("0042".utf8)) == 42)
        #expect(DecimalDigits.value(Array("18446744073709551615".utf8)) == UInt64.max)
        #expect(DecimalDigits.value("1764423456789".utf8) == 1_764_423_456_789)
    }

    @Test func anythingElseIsNotANumber() {
        for text in ["", "+1", "-1", " 1", "1 ", "1.0", "1e3", "0x1", "١", "18446744073709551616", "99999999999999999999"] {
            #expect(DecimalDigits.value(Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test func aStreamIDIsTwoNumbers() {
        #expect(DecimalDigits.pair("1764423456789-0".utf8, separator: UInt8(ascii: "-")) ?? (0, 0) == (1_764_423_456_789, 0))
        #expect(DecimalDigits.pair("12-7".utf8, separator: UInt8(ascii: "-")) ?? (0, 0) == (12, 7))
        for text in ["", "-", "12", "12-", "-7", "12-7-1", "a-7", "12-b", "12--7"] {
            #expect(DecimalDigits.pair(text.utf8, separator: UInt8(ascii: "-")) == nil, "\(text)")
        }
    }
}
