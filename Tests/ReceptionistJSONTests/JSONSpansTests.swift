import ReceptionistJSON
import Testing

@Suite struct JSONSpansTests {
    private func text(_ json: String) throws -> [UInt8] {
        try JSONParser.compact(Array(json.utf8))
    }

    private func slice(_ bytes: [UInt8], _ range: Range<Int>) -> String {
        String(decoding: bytes[range], as: UTF8.self)
    }

    @Test func membersAreFoundWithTheirValuesAsWritten() throws {
        let bytes = try text(#" { "a" : 1.10 , "b\"c" : {"x":[1,"]}"]} , "d":"\u00e9,}", "e":null, "f":true, "g":1e400 } "#)
        let members = try #require(JSONSpans.members(of: bytes, in: 0..<bytes.count))
        #expect(members.map(\.key) == ["a", "b\"c", "d", "e", "f", "g"])
        #expect(members.map { slice(bytes, $0.value) } == ["1.10", #"{"x":[1,"]}"]}"#, #""\u00e9,}""#, "null", "true", "1e400"])
    }

    @Test func elementsAreFoundInOrder() throws {
        let bytes = try text(#"[ {"topic":"a","data":[1,[2]]}, "x,]", -0.0, [], {} ]"#)
        let elements = try #require(JSONSpans.elements(of: bytes, in: 0..<bytes.count))
        #expect(elements.map { slice(bytes, $0) } == [#"{"topic":"a","data":[1,[2]]}"#, #""x,]""#, "-0.0", "[]", "{}"])
        let inner = try #require(JSONSpans.members(of: bytes, in: elements[0]))
        #expect(inner.map(\.key) == ["topic", "data"])
        #expect(slice(bytes, inner[1].value) == "[1,[2]]")
    }

    @Test func emptyContainersAndWrongKindsAnswerAsTheyShould() throws {
        let object = try text("{}")
        #expect(JSONSpans.members(of: object, in: 0..<object.count)?.isEmpty == true)
        let array = try text("[]")
        #expect(JSONSpans.elements(of: array, in: 0..<array.count)?.isEmpty == true)
        #expect(JSONSpans.members(of: array, in: 0..<array.count) == nil, "an array is not an object")
        #expect(JSONSpans.elements(of: object, in: 0..<object.count) == nil, "an object is not an array")
        let scalar = try text("42")
        #expect(JSONSpans.members(of: scalar, in: 0..<scalar.count) == nil)
    }

    /// A member's value read from its text is what parsing it gives: a string without an escape
    /// taken as it lies, one with an escape, and values of every other kind.
    @Test func aValueReadFromItsSpanIsWhatParsingGives() throws {
        let whole = try text(#"{"plain":"café ok","escaped":"a\"b\u00e9","n":1.50,"o":{"k":[true,null]},"e":""}"#)
        let members = try #require(JSONSpans.members(of: whole, in: 0..<whole.count))
        #expect(members.map(\.key) == ["plain", "escaped", "n", "o", "e"])
        for member in members {
            #expect(JSONSpans.value(of: whole, in: member.value) == (try JSONParser.parse(Array(whole[member.value]))), "\(member.key)")
        }
        #expect(JSONSpans.value(of: whole, in: members[1].value) == .string("a\"b\u{e9}"))
    }
}
