import ReceptionistJSON
import Testing

/// `JSONParser.validate` builds nothing, so it must accept and refuse exactly what `parse` does,
/// with the same error: it is what stands between a publisher's text and every subscriber.
@Suite struct JSONValidateTests {
    static let texts: [String] = [
        // Accepted.
        #"{"sentAt":1732800000000000,"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#,
        #" {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d\u00e9\n\ud83d\ude00"}} "#,
        #"{"a":1,"a":2}"#, "[]", "{}", "0", "-0", "1e400", "123456789012345678901234567890", #""""#,
        #""é""#, #""\/\b\f\n\r\t\\\"""#, "[[[[]]]]", #"{"":{"":[{}]}}"#,
        // Refused.
        "", " ", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", ".5", "-", "+1", "1e", "tru", "nul",
        "\"abc", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\u{1}b\"", "[1] 2", "{\"a\" 1}",
        "NaN", "-01", "1.e5", "--1", "{\"a\":}", "[,1]", "{\"a\":1 \"b\":2}", "\"\\u12\"", "\"\\u12G4\"",
    ]

    @Test(arguments: texts)
    func agreesWithParsing(_ text: String) {
        Self.expectAgreement(Array(text.utf8))
    }

    @Test func agreesOnInvalidUTF8InAPlainRunOrAfterAnEscape() {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0x61, 0xC3, 0x22], [0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22], [0x22, 0xC3, 0xA9, 0x22]] {
            Self.expectAgreement(bytes)
        }
    }

    @Test func agreesOnNestingAtAndPastTheLimit() {
        for depth in [JSONParser.maxDepth - 1, JSONParser.maxDepth, JSONParser.maxDepth + 1, 10_000] {
            Self.expectAgreement(Array((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8))
        }
    }

    /// Every one-byte change of a few documents, each byte set to each of a set of bytes that
    /// matter to the grammar: thousands of near-valid texts, accepted or refused alike.
    @Test func agreesOnEveryOneByteChange() {
        let documents = [
            #"{"sentAt":17,"text":"ab\u00e9\n","list":[1,-2.5e3,true,false,null,{}],"o":{"k":"v"}}"#,
            #"["\ud83d\ude00",0.5,"x\\y",[[]]]"#,
        ]
        let replacements: [UInt8] = Array(#"{}[]":,"\-+.eE0123456789 tfnu"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF]
        var checked = 0
        for document in documents {
            let bytes = Array(document.utf8)
            for index in bytes.indices {
                for replacement in replacements where replacement != bytes[index] {
                    var changed = bytes
                    changed[index] = replacement
                    Self.expectAgreement(changed)
                    checked += 1
                }
            }
        }
        #expect(checked > 3_000)
    }

    @Test(arguments: [
        (#" { "a" : [ 1 , "b c" ] , "d\"" : null } "#, #"{"a":[1,"b c"],"d\"":null}"#),
        (#"{"a":[1,"b c"],"d\"":null}"#, #"{"a":[1,"b c"],"d\"":null}"#),
        ("\t[1,\n2]\r\n", "[1,2]"), ("1 ", "1"), (#"" a ""#, #"" a ""#), (#"["\t", " "]"#, #"["\t"," "]"#),
    ])
    func compactDropsOnlyTheWhitespaceOutsideStrings(_ text: String, _ compact: String) throws {
        #expect(try JSONParser.compact(Array(text.utf8)) == Array(compact.utf8))
    }

    @Test func compactRefusesWhatParsingRefuses() {
        #expect(throws: JSONParser.Error.self) { try JSONParser.compact(Array("[1,]".utf8)) }
        #expect(throws: JSONParser.Error.self) { try JSONParser.compact(Array("[1] 2".utf8)) }
    }

    private static func expectAgreement(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let parsed = Result { () throws(JSONParser.Error) in try JSONParser.parse(bytes) }
        let validated = Result { () throws(JSONParser.Error) in try JSONParser.validate(bytes) }
        switch (parsed, validated) {
        case (.success, .success): break
        case (.failure(let parseError), .failure(let validateError)):
            #expect(parseError == validateError, "\(bytes)", sourceLocation: sourceLocation)
        default:
            Issue.record("parse \(parsed), validate \(validated) for \(bytes)", sourceLocation: sourceLocation)
        }
    }
}
