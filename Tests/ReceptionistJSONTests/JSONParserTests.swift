import ReceptionistJSON
import Testing

@Suite struct JSONParserTests {
    @Test func parsesEveryKind() throws {
        let value = try JSONParser.parse(#" {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d\u00e9\n\ud83d\ude00"}} "#)
        #expect(value["b"] == ["c": "dé\n😀"])
        #expect(JSONWriter.string(value) == #"{"a":[1,-2.5,3e2,true,false,null],"b":{"c":"dé\n😀"}}"#)
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", ".5", "-", "+1", "1e", "tru", "nul",
        "\"abc", "\"\\x\"", "\"\\ud800\"", "\"a\u{1}b\"", "[1] 2", "{\"a\" 1}", "NaN", "-01", "1.e5", "--1",
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

    @Test func encodesCompactlyInMemberOrder() throws {
        let value: JSONValue = ["b": [1, 2.5, "x\"y"], "a": nil, "c": ["z": true]]
        #expect(JSONWriter.string(value) == #"{"b":[1,2.5,"x\"y"],"a":null,"c":{"z":true}}"#)
        #expect(try JSONParser.parse(JSONWriter.encode(value)) == value)
        #expect(JSONWriter.string("\u{1}\t") == #""\u0001\t""#)
        #expect(JSONWriter.string(.number(JSONNumber(1e300))) == "1e+300")
    }
}

/// What a publisher or a model's writer sent comes back as sent: numbers as written, members in
/// their order; only whitespace outside strings may go.
@Suite struct JSONExactnessTests {
    static let texts = [
        #"{"id":123456789012345678,"n":9007199254740993,"a":1,"Z":2}"#,
        #"{"d":1.10,"big":1e400,"neg":-0.0,"e":1E+2,"tiny":5e-324,"z":0}"#,
        #"[18446744073709551616123,-0,0.000,12.500e+00]"#,
        #"{"s":"\u00e9\n\/x","nested":{"b":1,"a":[{"y":2,"x":1}]}}"#,
        #"-1.5e-7"#,
    ]

    @Test(arguments: texts)
    func parsingThenWritingGivesTheSameText(_ text: String) throws {
        let value = try JSONParser.parse(text)
        let written = JSONWriter.string(value)
        if text.contains("\\") {
            // Escapes are decoded by the parser: the value, not its spelling, survives a model.
            #expect(try JSONParser.parse(written) == value)
        } else {
            #expect(written == text)
        }
    }

    @Test(arguments: texts)
    func compactKeepsEveryByteButWhitespaceOutsideStrings(_ text: String) throws {
        #expect(try JSONParser.compact(Array(text.utf8)) == Array(text.utf8))
        #expect(try JSONParser.compact(Array(Self.spaced(text).utf8)) == Array(text.utf8))
    }

    /// `text` with all four kinds of whitespace around every structural character outside strings.
    static func spaced(_ text: String) -> String {
        var out = " \n"
        var inString = false, escaped = false
        for character in text {
            if inString {
                out.append(character)
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { inString = false }
            } else if "{}[],:".contains(character) {
                out += " \t\(character)\r\n"
            } else {
                if character == "\"" { inString = true }
                out.append(character)
            }
        }
        return out + " "
    }

    @Test func compactLeavesStringsAlone() throws {
        let text = #"{ "a b" : "x , y : \" } ", "c":[ "\\" , "\u0020" ] }"#
        #expect(String(decoding: try JSONParser.compact(Array(text.utf8)), as: UTF8.self)
            == #"{"a b":"x , y : \" } ","c":["\\","\u0020"]}"#)
    }

    @Test(arguments: ["", " ", "{", "[1,]", "01", "NaN", "\"\\x\"", "[1] 2"])
    func compactRefusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONParser.Error.self) { try JSONParser.compact(Array(text.utf8)) }
    }

    @Test func numbersCompareByTheirLiteral() throws {
        #expect(try JSONParser.parse("1") != JSONParser.parse("1.0"))
        #expect(try JSONParser.parse("9007199254740993") != JSONParser.parse("9007199254740992"))
        #expect(try JSONParser.parse("9007199254740993").numberValue == 9_007_199_254_740_992)
        #expect(try JSONParser.parse("18446744073709551615").uint64Value == .max)
        #expect(try JSONParser.parse("1e400").numberValue == .infinity)
        #expect(try JSONParser.parse("1.5").uint64Value == nil)
    }

    @Test func membersKeepTheirOrderAndARepeatedNameItsFirstPlace() throws {
        let value = try JSONParser.parse(#"{"z":1,"a":2,"m":3,"a":4}"#)
        #expect(JSONWriter.string(value) == #"{"z":1,"a":4,"m":3}"#)
        #expect(value != (try JSONParser.parse(#"{"a":4,"z":1,"m":3}"#)), "order is part of the value")
    }

    @Test func settingAMemberKeepsItsPlaceAndANewOneGoesLast() throws {
        var value = try JSONParser.parse(#"{"z":{"y":1,"x":2},"a":1}"#)
        value.setValue(5, at: ["z", "y"][...])
        value.setValue(6, at: ["b"][...])
        value.setValue(7, at: ["z", "w", "v"][...])
        #expect(JSONWriter.string(value) == #"{"z":{"y":5,"x":2,"w":{"v":7}},"a":1,"b":6}"#)
    }

    @Test func aMergePatchAppendsNewMembersInItsOwnOrder() throws {
        var value = try JSONParser.parse(#"{"z":1,"style":{"b":1,"a":2},"a":3}"#)
        _ = value.applyMergePatch(try JSONParser.parse(#"{"q":1,"style":{"c":3,"b":9},"a":null,"p":2}"#))
        #expect(JSONWriter.string(value) == #"{"z":1,"style":{"b":9,"a":2,"c":3},"q":1,"p":2}"#)
    }

    /// A member named in another Unicode form (`e` and a combining accent for `é`) is the member
    /// stored, and its effect names it as stored: a receiver applying the path by its bytes
    /// updates the member it holds instead of adding a second one.
    @Test func aMergePatchNamesAMemberAsItIsStored() throws {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        var value: JSONValue = .object([composed: ["x": 1], "n": 1])
        let effects = value.applyMergePatch(.object([decomposed: ["x": 2], "n": 2]))
        #expect(effects.map { $0.path.map { Array($0.utf8) } } == [[Array(composed.utf8), Array("x".utf8)], [Array("n".utf8)]])
        #expect(Array(value.objectValue!.keys[0].utf8) == Array(composed.utf8))
        let removed = value.applyMergePatch(.object([decomposed: .null]))
        #expect(removed.map { $0.path.map { Array($0.utf8) } } == [[Array(composed.utf8)]])
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
        (#"{"e":null}"#, #"{"a":1}"#, #"{"e":null,"a":1}"#),
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

@Suite struct JSONParserStringTests {
    @Test func aPlainRunThenWhateverFollowsItIsReadExactly() throws {
        #expect(try JSONParser.parse(#""abc""#) == .string("abc"))
        #expect(try JSONParser.parse(#""""#) == .string(""))
        #expect(try JSONParser.parse(#""ab\ncd""#) == .string("ab\ncd"))
        #expect(try JSONParser.parse(#""ab\u00e9""#) == .string("abé"))
        #expect(try JSONParser.parse(Array("\"abé\"".utf8)) == .string("abé"))
        #expect(try JSONParser.parse(#"{"key":"value","k2":["x","y\"z"]}"#) == ["key": "value", "k2": ["x", "y\"z"]])
    }

    @Test func aBadByteAfterAPlainRunIsStillRefused() {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(Array("\"ab\u{01}\"".utf8)) }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(#""abc"#) }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0x61, 0xFF, 0x22]) }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(#""ab\q""#) }
    }
}
