import ReceptionistJSON
import Testing

@Suite struct JSONParserTests {
    @Test func parsesEveryKind() throws {
        let value = try JSONParser.parse(#" {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d\u00e9\n\ud83d\ude00"}} "#)
        #expect(value == ["a": [1, -2.5, 300, true, false, nil], "b": ["c": "dé\n😀"]])
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", ".5", "-", "+1", "1e", "tru", "nul",
        "\"abc", "\"\\x\"", "\"\\ud800\"", "\"a\u{1}b\"", "[1] 2", "{\"a\" 1}", "NaN", "1e999",
    ])
    func refusesInvalidText(_ text: String) {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(text) }
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(deep) }
        let fine = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: Never.self) { try JSONParser.parse(fine) }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
    }

    @Test func encodesCompactlyWithSortedKeys() throws {
        let value: JSONValue = ["b": [1, 2.5, "x\"y"], "a": nil, "c": ["z": true]]
        #expect(JSONWriter.string(value) == #"{"a":null,"b":[1,2.5,"x\"y"],"c":{"z":true}}"#)
        #expect(try JSONParser.parse(JSONWriter.encode(value)) == value)
        #expect(JSONWriter.string("\u{1}\t") == #""\u0001\t""#)
        #expect(JSONWriter.string(.number(1e300)) == "1e+300")
    }
}

@Suite struct JSONValueTests {
    @Test func setValueCreatesIntermediateObjects() {
        var value: JSONValue = ["a": 1]
        value.setValue(3, at: ["style", "border", "width"][...])
        #expect(value == ["a": 1, "style": ["border": ["width": 3]]])
        value.setValue(nil, at: ["style", "border", "width"][...])
        #expect(value == ["a": 1, "style": ["border": [:]]])
        value.setValue(nil, at: ["missing", "deep"][...])
        #expect(value == ["a": 1, "style": ["border": [:]]])
        #expect(value.value(at: ["style", "border"]) == [:])
        #expect(value.value(at: ["a", "b"]) == nil)
    }

    /// The examples of RFC 7386 Appendix A.
    @Test(arguments: [
        (#"{"a":"b"}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"b"}"#, #"{"b":"c"}"#, #"{"a":"b","b":"c"}"#),
        (#"{"a":"b"}"#, #"{"a":null}"#, #"{}"#),
        (#"{"a":"b","b":"c"}"#, #"{"a":null}"#, #"{"b":"c"}"#),
        (#"{"a":["b"]}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"c"}"#, #"{"a":["b"]}"#, #"{"a":["b"]}"#),
        (#"{"a":{"b":"c"}}"#, #"{"a":{"b":"d","c":null}}"#, #"{"a":{"b":"d"}}"#),
        (#"{"a":[{"b":"c"}]}"#, #"{"a":[1]}"#, #"{"a":[1]}"#),
        (#"["a","b"]"#, #"["c","d"]"#, #"["c","d"]"#),
        (#"{"a":"b"}"#, #"["c"]"#, #"["c"]"#),
        (#"{"a":"foo"}"#, #"null"#, #"null"#),
        (#"{"a":"foo"}"#, #""bar""#, #""bar""#),
        (#"{"e":null}"#, #"{"a":1}"#, #"{"a":1,"e":null}"#),
        (#"[1,2]"#, #"{"a":"b","c":null}"#, #"{"a":"b"}"#),
        (#"{}"#, #"{"a":{"bb":{"ccc":null}}}"#, #"{"a":{"bb":{}}}"#),
    ])
    func mergePatchFollowsRFC7386(_ original: String, _ patch: String, _ result: String) throws {
        var value = try JSONParser.parse(original)
        let effects = value.applyMergePatch(try JSONParser.parse(patch))
        #expect(value == (try JSONParser.parse(result)))
        // Replaying the reported effects on the original reproduces the result.
        var replay = try JSONParser.parse(original)
        for effect in effects {
            replay.setValue(effect.value, at: effect.path[...])
        }
        #expect(replay == value)
    }
}
