import ReceptionistJSON
import ReceptionistWire
import Testing

@Suite struct SubscriptionOptionsTests {
    private typealias Decoded = Result<SubscriptionOptions, SubscriptionOptions.Problem>

    /// The options among the members of a `subscribe` message written as JSON text.
    private func message(_ text: String) throws -> Decoded {
        SubscriptionOptions.decode(message: try JSONParser.parse(text))
    }

    /// The options in a query string's parameters, given already percent-decoded, in order.
    private func query(_ parameters: [(String, String)]) -> Decoded {
        SubscriptionOptions.decode(query: { name in parameters.filter { $0.0 == name }.map(\.1) })
    }

    /// The field a `bad_message` names, read from between the quotes its message starts with.
    private func badField(_ result: Decoded) -> String? {
        guard case .failure(let problem) = result, problem.code == .badMessage else { return nil }
        let parts = problem.message.split(separator: "\"", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0].isEmpty else { return nil }
        return String(parts[1])
    }

    /// A list is split on its commas before its items are decoded: an escaped comma stays in
    /// its item (the decoding here stands for percent-decoding: `~` for a comma).
    @Test func aListIsSplitBeforeItsItemsAreDecoded() throws {
        let decoded = SubscriptionOptions.decode(
            query: { ["models": ["a~b,c"], "paths": ["k~1"], "maxRate": ["2"]][$0] ?? [] },
            decoding: { String($0.map { $0 == "~" ? "," : $0 }) })
        let options = try decoded.get()
        #expect(options.models == ["a,b", "c"] && options.paths == [["k,1"]])
    }

    /// A key path is split at every `.` byte, even one a combining mark follows, as the change
    /// paths a subscriber is sent are split.
    @Test func aPathIsSplitAtADotBeforeACombiningMark() throws {
        let options = try message(#"{"type":"subscribe","store":"s","paths":["a.\u0301b"]}"#).get()
        #expect(options.paths == [["a", "\u{301}b"]])
    }

    // MARK: From a subscribe message

    /// A model prefix and a key path match by bytes: two written differently (`é` as one code point
    /// or two) are two options, kept apart and never one group. Before, Swift's `String` took them
    /// for one, and a subscriber could get another's filter.
    @Test func optionsWrittenWithOtherBytesAreOtherOptions() {
        let composed = SubscriptionOptions(models: ["\u{E9}*"]), decomposed = SubscriptionOptions(models: ["e\u{301}*"])
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed]).count == 2)
        #expect(SubscriptionOptions(models: ["\u{E9}*", "e\u{301}*", "\u{E9}*"]).models?.count == 2)
        #expect(SubscriptionOptions(paths: [["\u{E9}"], ["e\u{301}"]]).paths?.count == 2)
        #expect(SubscriptionOptions(models: ["b", "a", "b"]) == SubscriptionOptions(models: ["a", "b"]))
    }

    @Test func aMessageWithoutOptionsHasNone() throws {
        #expect(try message(#"{"type":"subscribe","store":"s"}"#).get() == .none)
        #expect(try message(#"{"type":"subscribe","store":"s","models":null,"paths":null,"maxRate":null,"old":null}"#).get() == .none)
        #expect(try message(#"{"type":"subscribe","store":"s","old":false}"#).get().isNone)
        #expect(SubscriptionOptions.none.isNone)
        #expect(SubscriptionOptions.none.models == nil && SubscriptionOptions.none.paths == nil)
        #expect(SubscriptionOptions.none.maxRate == nil && !SubscriptionOptions.none.old)
    }

    @Test func decodesEveryOptionOfAMessage() throws {
        let options = try message(
            #"{"type":"subscribe","store":"tiles","models":["tile-3","tile-1*"],"paths":["color","style.border"],"maxRate":4,"old":true}"#
        ).get()
        #expect(options.models == ["tile-1*", "tile-3"])
        #expect(options.paths == [["color"], ["style", "border"]])
        #expect(options.maxRate == 4)
        #expect(options.old)
        #expect(!options.isNone)
        #expect(options == SubscriptionOptions(
            models: ["tile-3", "tile-1*"], paths: [["style", "border"], ["color"]], maxRate: 4, old: true))
    }

    @Test func aFractionalRateIsKept() throws {
        #expect(try message(#"{"maxRate":0.5}"#).get().maxRate == 0.5)
        #expect(try message(#"{"maxRate":1000}"#).get().maxRate == 1000)
        #expect(try message(#"{"maxRate":1e3}"#).get().maxRate == 1000)
        #expect(try message(#"{"maxRate":0.01}"#).get().maxRate == 0.01)
    }

    /// Below one frame in 100 s a rate would hold changes, and a timer, for longer than any client
    /// waits; a tiny one would make the delay overflow.
    @Test func aRateBelowTheSlowestIsRefused() throws {
        for text in [#"{"maxRate":0.001}"#, #"{"maxRate":1e-300}"#, #"{"maxRate":5e-324}"#] {
            guard case .failure(let problem) = try message(text) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(problem.code == .badMessage && problem.message.contains("\"maxRate\""))
        }
        guard case .failure = query([("maxRate", "0.00000000000000001")]) else {
            Issue.record("a tiny rate in a query was accepted")
            return
        }
        guard case .failure = query([("maxRate", "0x10")]) else {
            Issue.record("a hexadecimal rate was accepted")
            return
        }
    }

    @Test func eachOptionAloneIsNotNone() throws {
        #expect(try !message(#"{"models":["a"]}"#).get().isNone)
        #expect(try !message(#"{"paths":["a"]}"#).get().isNone)
        #expect(try !message(#"{"maxRate":2}"#).get().isNone)
        #expect(try !message(#"{"old":true}"#).get().isNone)
    }

    // MARK: From a query string

    @Test func decodesEveryOptionOfAQuery() throws {
        let options = try query([("models", "tile-3,tile-4"), ("paths", "color"), ("maxRate", "4"), ("old", "true")]).get()
        #expect(options == SubscriptionOptions(models: ["tile-3", "tile-4"], paths: [["color"]], maxRate: 4, old: true))
        #expect(try query([]).get() == .none)
        #expect(try query([("since", "3"), ("epoch", "ab")]).get() == .none, "other parameters are not options")
    }

    @Test func queryListsAreCommaSeparatedOrRepeated() throws {
        let commas = try query([("models", "a,b*,c"), ("paths", "x.y,z")]).get()
        let repeated = try query([("models", "a"), ("paths", "z"), ("models", "b*"), ("models", "c"), ("paths", "x.y")]).get()
        let mixed = try query([("models", "c,a"), ("models", "b*"), ("paths", "z,x.y")]).get()
        #expect(commas.models == ["a", "b*", "c"])
        #expect(commas.paths == [["x", "y"], ["z"]])
        #expect(commas == repeated && repeated == mixed)
    }

    @Test func theQueryIsTakenAsDecodedByTheCaller() throws {
        // Percent-decoding is the caller's: a value holding a comma or a space arrives as it is.
        let options = try query([("models", "a b,c%2Cd")]).get()
        #expect(options.models == ["a b", "c%2Cd"])
    }

    @Test(arguments: [("true", true), ("1", true), ("", true), ("false", false), ("0", false)])
    func queryOldTakesTheUsualSpellings(text: String, expected: Bool) throws {
        #expect(try query([("old", text)]).get().old == expected)
    }

    @Test func aRepeatedScalarTakesItsLastValue() throws {
        #expect(try query([("maxRate", "2"), ("maxRate", "8")]).get().maxRate == 8)
        #expect(try query([("old", "true"), ("old", "false")]).get().old == false)
        #expect(try query([("maxRate", "2.5")]).get().maxRate == 2.5)
    }

    // MARK: Normalisation

    @Test func orderAndRepetitionDoNotMatter() throws {
        let first = try message(#"{"models":["b","a*","b"],"paths":["style.border","color","color"],"maxRate":2}"#).get()
        let second = try message(#"{"models":["a*","b"],"paths":["color","style.border"],"maxRate":2.0}"#).get()
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(Set([first, second]).count == 1)
        #expect(first.models == ["a*", "b"])
        #expect(first.paths == [["color"], ["style", "border"]])
        #expect(first == (try query([("paths", "color,style.border,color"), ("models", "b,a*"), ("maxRate", "2")]).get()))
    }

    @Test func differentOptionsAreNotEqual() throws {
        let base = try message(#"{"models":["a"],"paths":["x"],"maxRate":2,"old":true}"#).get()
        #expect(base != (try message(#"{"models":["a","b"],"paths":["x"],"maxRate":2,"old":true}"#).get()))
        #expect(base != (try message(#"{"models":["a*"],"paths":["x"],"maxRate":2,"old":true}"#).get()))
        #expect(base != (try message(#"{"models":["a"],"paths":["x.y"],"maxRate":2,"old":true}"#).get()))
        #expect(base != (try message(#"{"models":["a"],"paths":["x"],"maxRate":3,"old":true}"#).get()))
        #expect(base != (try message(#"{"models":["a"],"paths":["x"],"maxRate":2,"old":false}"#).get()))
        #expect(base != (try message(#"{"models":["a"],"paths":["x"],"old":true}"#).get()))
    }

    @Test func pathsAreSplitIntoComponents() throws {
        // "a.b" is two components; one component "a.b" would be another path.
        let options = try message(#"{"paths":["a.b.c","d"]}"#).get()
        #expect(options.paths == [["a", "b", "c"], ["d"]])
        #expect(options != SubscriptionOptions(paths: [["a.b.c"], ["d"]]))
    }

    // MARK: Bad values

    @Test(arguments: [
        // Lists: not a list, not strings, empty, an empty id, an empty segment.
        (#"{"models":"a"}"#, "models"), (#"{"models":[1]}"#, "models"), (#"{"models":["a",null]}"#, "models"),
        (#"{"models":[]}"#, "models"), (#"{"models":[""]}"#, "models"), (#"{"models":["a",""]}"#, "models"),
        (#"{"models":{}}"#, "models"),
        (#"{"paths":"color"}"#, "paths"), (#"{"paths":[true]}"#, "paths"), (#"{"paths":[]}"#, "paths"),
        (#"{"paths":[""]}"#, "paths"), (#"{"paths":["a..b"]}"#, "paths"), (#"{"paths":[".a"]}"#, "paths"),
        (#"{"paths":["a."]}"#, "paths"), (#"{"paths":["color","."]}"#, "paths"),
        // Rates: zero, negative, a string, too fast, not finite, not a number.
        (#"{"maxRate":0}"#, "maxRate"), (#"{"maxRate":-1}"#, "maxRate"), (#"{"maxRate":-0.5}"#, "maxRate"),
        (#"{"maxRate":"4"}"#, "maxRate"), (#"{"maxRate":1000.5}"#, "maxRate"), (#"{"maxRate":1001}"#, "maxRate"),
        (#"{"maxRate":1e400}"#, "maxRate"), (#"{"maxRate":-1e400}"#, "maxRate"), (#"{"maxRate":true}"#, "maxRate"),
        (#"{"maxRate":[4]}"#, "maxRate"), (#"{"maxRate":{}}"#, "maxRate"),
        // Old: anything but a bool.
        (#"{"old":1}"#, "old"), (#"{"old":"true"}"#, "old"), (#"{"old":[]}"#, "old"), (#"{"old":{}}"#, "old"),
    ])
    func aBadMessageValueNamesItsField(text: String, field: String) throws {
        #expect(badField(try message(text)) == field)
    }

    @Test(arguments: [
        ([("models", "")], "models"), ([("models", "a,")], "models"), ([("models", ",a")], "models"),
        ([("models", "a"), ("models", "")], "models"),
        ([("paths", "")], "paths"), ([("paths", "a..b")], "paths"), ([("paths", "a.")], "paths"), ([("paths", "x,.y")], "paths"),
        ([("maxRate", "0")], "maxRate"), ([("maxRate", "-2")], "maxRate"), ([("maxRate", "fast")], "maxRate"),
        ([("maxRate", "")], "maxRate"), ([("maxRate", "1001")], "maxRate"), ([("maxRate", "inf")], "maxRate"),
        ([("maxRate", "nan")], "maxRate"), ([("maxRate", "-inf")], "maxRate"), ([("maxRate", "4 ")], "maxRate"),
        ([("old", "yes")], "old"), ([("old", "TRUE")], "old"), ([("old", "2")], "old"),
    ])
    func aBadQueryValueNamesItsField(parameters: [(String, String)], field: String) {
        #expect(badField(query(parameters)) == field)
    }

    @Test func aBadPathIsQuotedInTheMessage() throws {
        guard case .failure(let problem) = try message(#"{"paths":["color","style..border"]}"#) else {
            Issue.record("a path with an empty segment was accepted")
            return
        }
        #expect(problem.message.contains("style..border"))
    }

    @Test func listsAreBounded() throws {
        let ids = (0...SubscriptionOptions.maxModels).map { "m\($0)" }
        #expect(badField(SubscriptionOptions.decode(message: ["models": .array(ids.map(JSONValue.string))])) == "models")
        let fewer = try SubscriptionOptions.decode(message: ["models": .array(ids.dropLast().map(JSONValue.string))]).get()
        #expect(fewer.models?.count == SubscriptionOptions.maxModels)

        let paths = (0...SubscriptionOptions.maxPaths).map { "p\($0)" }
        #expect(badField(SubscriptionOptions.decode(message: ["paths": .array(paths.map(JSONValue.string))])) == "paths")
        let fewerPaths = try SubscriptionOptions.decode(message: ["paths": .array(paths.dropLast().map(JSONValue.string))]).get()
        #expect(fewerPaths.paths?.count == SubscriptionOptions.maxPaths)
    }

    // MARK: Through ClientMessage

    @Test func aSubscribeMessageCarriesItsOptions() throws {
        let text = #"{"type":"subscribe","store":"tiles","since":7,"models":["b","a"],"maxRate":4}"#
        let decoded = try ClientMessage.decode(Array(text.utf8)).get()
        #expect(decoded == .subscribe(.store("tiles"), since: 7, options: SubscriptionOptions(models: ["a", "b"], maxRate: 4)))
        let plain = try ClientMessage.decode(Array(#"{"type":"subscribe","store":"tiles"}"#.utf8)).get()
        #expect(plain == .subscribe(.store("tiles"), since: nil, options: .none))
    }

    @Test(arguments: [
        #"{"type":"subscribe","topic":"news","models":["a"]}"#,
        #"{"type":"subscribe","topic":"news","paths":["color"]}"#,
        #"{"type":"subscribe","topic":"news","maxRate":4}"#,
        #"{"type":"subscribe","topic":"news","old":true}"#,
        #"{"type":"subscribe","topic":"news","since":3,"models":["a"],"paths":["b"],"maxRate":1,"old":true}"#,
    ])
    func optionsOnATopicAreRefused(text: String) {
        guard case .failure(let problem) = ClientMessage.decode(Array(text.utf8)) else {
            Issue.record("a topic subscription with options was accepted: \(text)")
            return
        }
        #expect(problem.code == .badMessage)
    }

    @Test func aBadOptionInASubscribeMessageIsABadMessageNamingIt() {
        guard case .failure(let problem) = ClientMessage.decode(Array(#"{"type":"subscribe","store":"s","maxRate":0}"#.utf8)) else {
            Issue.record("maxRate 0 was accepted")
            return
        }
        #expect(problem.code == .badMessage)
        #expect(problem.message.contains("\"maxRate\""))
    }
}
