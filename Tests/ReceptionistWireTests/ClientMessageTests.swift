import ReceptionistWire
import Testing

@Suite struct ClientMessageTests {
    private func decode(_ text: String) -> Result<ClientMessage, ClientMessage.Problem> {
        ClientMessage.decode(Array(text.utf8))
    }

    private func code(_ text: String) -> String? {
        if case .failure(let problem) = decode(text) { return problem.code.rawValue }
        return nil
    }

    @Test func decodesEveryMessage() throws {
        #expect(try decode(#"{"type":"subscribe","store":"tiles"}"#).get() == .subscribe(.store("tiles"), since: nil))
        #expect(try decode(#"{"type":"subscribe","store":"tiles","since":1200}"#).get() == .subscribe(.store("tiles"), since: 1200))
        #expect(try decode(#"{"type":"subscribe","topic":"news","since":0}"#).get() == .subscribe(.topic("news"), since: 0))
        #expect(try decode(#"{"type":"subscribe","topic":"news","since":null}"#).get() == .subscribe(.topic("news"), since: nil))
        #expect(try decode(#"{"type":"subscribe","store":"s","since":3,"epoch":"ab12"}"#).get()
            == .subscribe(.store("s"), since: 3, epoch: "ab12"))
        #expect(try decode(#"{"type":"unsubscribe","topic":"news"}"#).get() == .unsubscribe(.topic("news")))
        #expect(try decode(#" {"store":"s","type":"unsubscribe"} "#).get() == .unsubscribe(.store("s")))
        #expect(try decode(#"{"type":"auth","token":"a.b.c"}"#).get() == .authenticate(token: "a.b.c"))
        #expect(try decode(#"{"type":"ping"}"#).get() == .ping(ref: nil))
        #expect(try decode(#"{"type":"ping","ref":"p-3"}"#).get() == .ping(ref: "p-3"))
    }

    @Test func aSubscriptionMayAskForPresence() throws {
        #expect(try decode(#"{"type":"subscribe","topic":"chat","presence":true}"#).get()
            == .subscribe(.topic("chat"), since: nil, presence: true))
        #expect(try decode(#"{"type":"subscribe","store":"s","presence":false,"paths":["color"]}"#).get()
            == .subscribe(.store("s"), since: nil, options: SubscriptionOptions(paths: [["color"]]), presence: false))
        #expect(try decode(#"{"type":"subscribe","topic":"chat","presence":null}"#).get() == .subscribe(.topic("chat"), since: nil))
        guard case .failure(let problem) = decode(#"{"type":"subscribe","topic":"chat","presence":"yes"}"#) else {
            Issue.record("a presence that is not a boolean was accepted")
            return
        }
        #expect(problem.code == .badMessage && problem.message.contains("presence"), "the detail names the field")
    }

    @Test(arguments: [
        ("", "bad_message"), ("{", "bad_message"), ("[]", "bad_message"), ("\"subscribe\"", "bad_message"),
        (#"{"store":"s"}"#, "bad_message"), (#"{"type":1,"store":"s"}"#, "bad_message"),
        (#"{"type":"publish","store":"s"}"#, "bad_message"),
        (#"{"type":"shout","store":"s"}"#, "unknown_type"),
        (#"{"type":"auth"}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","epoch":7}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","epoch":""}"#, "bad_message"),
        (#"{"type":"auth","token":""}"#, "bad_message"),
        (#"{"type":"auth","token":7}"#, "bad_message"),
        (#"{"type":"subscribe"}"#, "bad_message"), (#"{"type":"subscribe","store":"s","topic":"t"}"#, "bad_message"),
        (#"{"type":"subscribe","store":5}"#, "bad_message"), (#"{"type":"subscribe","store":"s","since":-1}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","since":1.5}"#, "bad_message"), (#"{"type":"subscribe","store":"s","since":"3"}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","since":1e300}"#, "bad_message"),
        // Whole numbers only, as written: neither rounds to one.
        (#"{"type":"subscribe","store":"s","since":1.0000000000000001}"#, "bad_message"),
        (#"{"type":"subscribe","store":"s","since":1e-400}"#, "bad_message"),
        // Two credentials: which one the client meant is not guessed.
        (#"{"type":"auth","token":"t","apiKey":"k"}"#, "bad_message"),
        (#"{"type":"ping","ref":7}"#, "bad_message"),
    ])
    func refusesWithTheDocumentedCode(text: String, expected: String) {
        #expect(code(text) == expected)
    }

    @Test func sseEventsAreFramedPerTheStandard() {
        #expect(SSEEncoder.event("changes", id: 12, data: Array("{}".utf8)) == Array("event: changes\nid: 12\ndata: {}\n\n".utf8))
        #expect(SSEEncoder.event("gap", id: nil, data: Array("{}".utf8)) == Array("event: gap\ndata: {}\n\n".utf8))
        #expect(SSEEncoder.heartbeat == Array(": heartbeat\n\n".utf8))
        #expect(SSEEncoder.heartbeatEvent(intervalMilliseconds: 15_000)
            == Array("event: heartbeat\ndata: {\"type\":\"heartbeat\",\"intervalMs\":15000}\n\n".utf8))
    }

    @Test func aPublishKeepsItsDataAsWrittenAndEchoesItsRef() throws {
        let text = #"{"type":"publish", "ref":"r-1", "topic":"news", "data": {"b": 1.10, "a": "\u00e9"}}"#
        guard case .success(.publish(let topic, let data, let ref)) = decode(text) else {
            Issue.record("not decoded as a publish")
            return
        }
        #expect(topic == "news" && ref == "r-1")
        #expect(String(decoding: data, as: UTF8.self) == #"{"b":1.10,"a":"\u00e9"}"#)
        guard case .success(.publish(_, let null, nil)) = decode(#"{"type":"publish","topic":"t","data":null}"#) else {
            Issue.record("null data is data")
            return
        }
        #expect(null == Array("null".utf8))
    }

    /// A publish is read from its members without parsing its data, to the same result as the
    /// parsed message: a repeated name's last value wins, a type written with an escape is still
    /// a publish, members may come in any order, and a data member that is not the last is found.
    @Test func aPublishReadFromItsMembersIsWhatTheParsedMessageSays() {
        let cases: [(String, ClientMessage)] = [
            (#"{"data":[1, 2],"topic":"a","type":"publish"}"#, .publish(topic: "a", data: Array("[1,2]".utf8), ref: nil)),
            (#"{"type":"publish","topic":"a","topic":"b","data":1,"data":{"x" : "y z"}}"#,
             .publish(topic: "b", data: Array(#"{"x":"y z"}"#.utf8), ref: nil)),
            (#"{"type":"publish","topic":"t","data":"d","ref":"r"}"#, .publish(topic: "t", data: Array(#""d""#.utf8), ref: "r")),
            (#"{"type":"subscribe","type":"publish","topic":"t","data":true}"#, .publish(topic: "t", data: Array("true".utf8), ref: nil)),
            (#"{"type":"publish","topic":"t","data":0}"#, .publish(topic: "t", data: Array("0".utf8), ref: nil)),
            (#"{"type":"publish","topic":"t","ref":null,"data":{"ref":"inner","topic":"inner"}}"#,
             .publish(topic: "t", data: Array(#"{"ref":"inner","topic":"inner"}"#.utf8), ref: nil)),
        ]
        for (text, expected) in cases {
            #expect(decode(text) == .success(expected), "\(text)")
        }
        // A name or a type written with escapes is the same text once decoded: each message
        // decodes to the same publish as its plain twin. A `"publish"` written with an escape is
        // not the bytes the fast path looks for, so the parsed path must still read it as one.
        let plain = #"{"type":"publish","topic":"a","data":[1, 2],"ref":"r"}"#
        let plainPublish = ClientMessage.publish(topic: "a", data: Array("[1,2]".utf8), ref: "r")
        #expect(decode(plain) == .success(plainPublish))
        let escaped = [
            #"{"typ\u0065":"publish","topic":"a","data":[1, 2],"ref":"r"}"#,
            #"{"type":"publ\u0069sh","topic":"a","data":[1, 2],"ref":"r"}"#,
            #"{"type":"\u0070ublish","topic":"a","data":[1, 2],"ref":"r"}"#,
            #"{"\u0074ype":"\u0070ubl\u0069s\u0068","topic":"a","data":[1, 2],"ref":"r"}"#,
            #"{"type":"publish","t\u006fpic":"a","d\u0061ta":[1, 2],"r\u0065f":"r"}"#,
            #"{"type":"publ\u0069sh","t\u006fpic":"\u0061","d\u0061ta":[1, 2],"r\u0065f":"\u0072"}"#,
            // The escaped name is the same name: the last `type` wins, however written.
            #"{"type":"subscribe","typ\u0065":"publish","topic":"a","data":[1, 2],"ref":"r"}"#,
            #"{"typ\u0065":"subscribe","type":"publ\u0069sh","topic":"a","data":[1, 2],"ref":"r"}"#,
        ]
        for text in escaped {
            #expect(decode(text) == decode(plain), "\(text)")
        }
        // An escape decodes to exactly its character: a `type` that decodes to another word is
        // not a publish, and a publish overridden by a later escaped `type` is not one either.
        #expect(code(#"{"type":"\u0050ublish","topic":"a","data":1}"#) == "unknown_type")
        #expect(decode(#"{"type":"publish","typ\u0065":"subscribe","topic":"a"}"#) == .success(.subscribe(.topic("a"), since: nil)))
        #expect(decode(#"{"type":"publ\u0069sh","type":"subscribe","topic":"a"}"#) == .success(.subscribe(.topic("a"), since: nil)))
        guard case .failure(let broken) = decode(#"{"type":"publish","topic":"t","data":}"#) else {
            Issue.record("a publish that is not JSON was accepted")
            return
        }
        #expect(broken.code == .badMessage && broken.message.hasPrefix("not JSON: "))
        guard case .failure(let problem) = decode(#"["type","publish"]"#) else {
            Issue.record("an array was taken for a message")
            return
        }
        #expect(problem.message == "a message is a JSON object")
    }

    @Test func aBadPublishIsABadMessageThatEchoesAValidRef() {
        let long = String(repeating: "x", count: ClientMessage.maxRefBytes + 1)
        let cases: [(String, String?)] = [
            (#"{"type":"publish","topic":"t","ref":"r"}"#, "r"),
            (#"{"type":"publish","data":1,"ref":"r"}"#, "r"),
            (#"{"type":"publish","topic":5,"data":1}"#, nil),
            (#"{"type":"publish","topic":"t","data":1,"ref":""# + long + #""}"#, nil),
            (#"{"type":"publish","topic":"t","data":1,"ref":7}"#, nil),
        ]
        for (text, ref) in cases {
            guard case .failure(let problem) = decode(text) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(problem.code == .badMessage && problem.ref == ref, "\(text)")
        }
    }

    /// A commit's member the gateway does not know (a misspelt `ifversion`) is refused, not
    /// ignored: the commit would be applied without the condition its client meant.
    @Test func aCommitWithAnUnknownMemberIsABadMessage() {
        let known = #"{"type":"commit","store":"s","changes":[],"ifVersion":1,"ifMatch":{},"ref":"c"}"#
        guard case .success(.commit) = decode(known) else {
            Issue.record("\(known) was refused")
            return
        }
        guard case .failure(let problem) = decode(#"{"type":"commit","store":"s","changes":[],"ifversion":1,"ref":"c"}"#) else {
            Issue.record("a misspelt condition was accepted")
            return
        }
        #expect(problem.code == .badMessage && problem.ref == "c")
        #expect(problem.message.contains("unknown member 'ifversion'"))
    }

    /// A message's member the gateway does not know (a misspelt `pathz`) is refused: ignored, a
    /// subscription would send more than its client asked for, a publish be sent twice.
    @Test func aMessageWithAnUnknownMemberIsABadMessage() {
        let known = #"{"type":"subscribe","store":"s","since":1,"epoch":"e","models":["m"],"paths":["a"],"maxRate":2,"old":true,"presence":false}"#
        guard case .success(.subscribe) = decode(known) else {
            Issue.record("\(known) was refused")
            return
        }
        for text in [
            #"{"type":"subscribe","store":"s","pathz":["a"]}"#, #"{"type":"subscribe","topic":"t","Since":3}"#,
            #"{"type":"unsubscribe","store":"s","extra":[1]}"#, #"{"type":"auth","token":"a.b.c","exp":1}"#,
            #"{"type":"rpc","id":"1","method":"m","params":{}}"#, #"{"type":"ping","id":"p"}"#,
            #"{"type":"publish","topic":"t","data":1,"idempotencyKey":"k"}"#,
        ] {
            guard case .failure(let problem) = decode(text) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(problem.code == .badMessage && problem.message.contains("unknown member"))
        }
    }

    @Test func anAuthMessageCarriesATokenOrAnAPIKey() {
        #expect(decode(#"{"type":"auth","apiKey":"k"}"#) == .success(.authenticateKey(apiKey: "k")))
        #expect(decode(#"{"type":"auth","token":"t"}"#) == .success(.authenticate(token: "t")))
        guard case .failure(let problem) = decode(#"{"type":"auth","apiKey":""}"#) else {
            Issue.record("an empty key was accepted")
            return
        }
        #expect(problem.code == .badMessage)
    }
}
