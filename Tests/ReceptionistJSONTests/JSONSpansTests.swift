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
}
