import ReceptionistJSON
import Testing

@Suite struct JSONValueEqualityTests {
    /// `é` written as one code point and as `e` with a combining accent are one `String` to Swift,
    /// but two texts: as values they are unequal (a change from one to the other is a change), and
    /// equal values encode equally.
    @Test func stringsAndMemberNamesAreEqualByTheirBytes() throws {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect(composed == decomposed, "Swift's String, which this must not follow")
        #expect(JSONValue.string(composed) != .string(decomposed))
        #expect(JSONValue.string(composed) == .string("\u{E9}"))
        #expect(JSONValue.object([composed: 1]) != .object([decomposed: 1]))
        #expect(JSONValue.array([["k": .string(composed)]]) != .array([["k": .string(decomposed)]]))
        let a = try JSONParser.parse(#"{"x":{"k":"\u00e9"},"n":[1,2.50,null,true]}"#)
        let b = try JSONParser.parse(#"{"x":{"k":"é"},"n":[1,2.50,null,true]}"#)
        #expect(a == b && a.hashValue == b.hashValue)
        #expect(JSONWriter.encode(a) == JSONWriter.encode(b))
        #expect(a != (try JSONParser.parse(#"{"x":{"k":"e\u0301"},"n":[1,2.50,null,true]}"#)))
        #expect(a != (try JSONParser.parse(#"{"n":[1,2.50,null,true],"x":{"k":"\u00e9"}}"#)), "member order counts")
    }
}
