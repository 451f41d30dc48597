import Testing
@testable import ReceptionistWire

@Suite struct Base64Tests {
    // RFC 4648 section 10.
    @Test(arguments: [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648Vectors(_ plain: String, _ encoded: String) {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
    }

    @Test func everyByteValueAndLengthRoundTrips() {
        for length in 0..<70 {
            let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 255 - length) }
            let text = Base64.encode(data)
            #expect(text.utf8.count == (length + 2) / 3 * 4)
            #expect(Base64.decode(text) == data, "length \(length)")
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64.decode(Base64.encode(all)) == all)
        #expect(Base64.encode([0xFB, 0xFF, 0xBF]) == "+/+/")
    }

    @Test(arguments: [
        "Zg",  // padding missing
        "Zg=",  // length not a multiple of 4
        "Z===",  // too much padding
        "====",
        "Zh==",  // unused bits set: not the canonical form of "f"
        "Zm9=",  // unused bits set with one '='
        "Zg==Zg==",  // padding in the middle
        "Zm=v",
        "Zm9v\n",
        "Zm 9v",
        " Zm9v",
        "-_8=",  // URL-safe alphabet
        "Zm9\u{e9}",
    ])
    func strictDecodingRejects(_ text: String) {
        #expect(Base64.decode(text) == nil, "accepted \(text.debugDescription)")
    }
}
