@testable import ReceptionistGateway
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistWire
import Testing

@Suite struct HookDecisionTests {
    private func parsed(_ text: String) -> JSONValue { try! JSONParser.parse(Array(text.utf8)) }

    @Test func aConnectAnswerGrantsWhatATokenWould() {
        let answer = HookAnswer.answered(status: 200, body: parsed(
            #"{"user":"ann","info":{"name":"Ann"},"expiresAt":2000,"stores":["orders.*"],"topics":["chat"],"publish":["chat"],"write":["paint"]}"#))
        guard case .admit(let claims) = HookDecision.connect(answer, nowSeconds: 1000) else {
            Issue.record("not admitted")
            return
        }
        #expect(claims.subject == "ann" && claims.expiresAt == 2000)
        #expect(claims.allows(.store("orders.eu")) && !claims.allows(.store("paint")))
        #expect(claims.allowsPublishing(to: "chat") && claims.allowsWriting(to: "paint") && !claims.allowsWriting(to: "orders.eu"))
        #expect(claims.info == Array(#"{"name":"Ann"}"#.utf8))
    }

    @Test func refusalsAndFailuresOfTheConnectHook() {
        #expect(HookDecision.connect(.answered(status: 403, body: parsed(#"{"reason":"banned"}"#)), nowSeconds: 0)
            == .refuse(status: 403, reason: "banned"))
        #expect(HookDecision.connect(.answered(status: 401, body: nil), nowSeconds: 0)
            == .refuse(status: 401, reason: "refused by the connect hook"))
        // A grant that ran out already is a refusal; a malformed one, or another status, no answer.
        #expect(HookDecision.connect(.answered(status: 200, body: parsed(#"{"user":"a","expiresAt":5}"#)), nowSeconds: 10)
            == .refuse(status: 401, reason: "the connect hook's grant has expired"))
        // The other hooks' refusal refuses here too, whatever else the answer says.
        #expect(HookDecision.connect(.answered(status: 200, body: parsed(#"{"allow":false,"user":"a","reason":"no"}"#)), nowSeconds: 0)
            == .refuse(status: 403, reason: "no"))
        #expect(HookDecision.connect(.answered(status: 200, body: parsed(#"{"allow":false}"#)), nowSeconds: 0)
            == .refuse(status: 403, reason: "refused by the connect hook"))
        guard case .admit = HookDecision.connect(.answered(status: 200, body: parsed(#"{"allow":true,"user":"a"}"#)), nowSeconds: 0) else {
            Issue.record("allow true with a user not admitted")
            return
        }
        for body in [#"{"info":{}}"#, #"{"user":"a","stores":"x"}"#, #"{"user":"a","info":[1]}"#, #"[1]"#, #"{"allow":"no","user":"a"}"#] {
            guard case .unavailable = HookDecision.connect(.answered(status: 200, body: parsed(body)), nowSeconds: 0) else {
                Issue.record("\(body) admitted or refused")
                continue
            }
        }
        guard case .unavailable = HookDecision.connect(.answered(status: 404, body: nil), nowSeconds: 0) else {
            Issue.record("a 404 admitted or refused")
            return
        }
    }

    @Test func allowDenyAndNoAnswer() {
        let rewrite = parsed(#"{"allow":true,"data":{"n":1.50}}"#)
        #expect(HookDecision.allow(.answered(status: 200, body: rewrite), hook: .publish) == .allow(rewrite))
        #expect(HookDecision.allow(.answered(status: 200, body: parsed(#"{"allow":false,"reason":"no"}"#)), hook: .publish) == .deny("no"))
        #expect(HookDecision.allow(.answered(status: 403, body: nil), hook: .write) == .deny("refused by the write hook"))
        guard case .unavailable = HookDecision.allow(.answered(status: 200, body: parsed("{}")), hook: .publish) else {
            Issue.record("an answer without allow decided")
            return
        }
    }

    @Test func aSubscribeAnswerNarrowsAStoreAndOnlyAllowsATopic() {
        let asked = SubscriptionOptions(models: ["a", "b"], maxRate: 4)
        let allow = HookAnswer.answered(status: 200, body: parsed(#"{"allow":true,"models":["b","c"],"paths":["color"]}"#))
        #expect(HookDecision.subscribe(allow, asked: asked) == .success(SubscriptionOptions(models: ["b"], paths: [["color"]], maxRate: 4)))
        #expect(HookDecision.subscribe(allow, asked: .none, store: false) == .success(.none))
        let none = HookAnswer.answered(status: 200, body: parsed(#"{"allow":true,"models":["z"]}"#))
        guard case .failure(let problem) = HookDecision.subscribe(none, asked: asked), problem.code == .forbidden else {
            Issue.record("a subscription left with nothing was not refused")
            return
        }
        let malformed = HookAnswer.answered(status: 200, body: parsed(#"{"allow":true,"paths":["a..b"]}"#))
        guard case .failure(let bad) = HookDecision.subscribe(malformed, asked: asked), bad.code == .unavailable else {
            Issue.record("malformed paths were taken")
            return
        }
    }

    /// `"models": null` or `[]` (and the same of `paths`) allows nothing. Before, `null` allowed
    /// the whole store, and `[]` was taken for a failed hook (`unavailable`, try again).
    @Test(arguments: [#""models":null"#, #""models":[]"#, #""paths":null"#, #""paths":[]"#])
    func aSubscribeAnswerAllowingAnEmptyOrNullListAllowsNothing(field: String) {
        let answer = HookAnswer.answered(status: 200, body: parsed("{\"allow\":true,\(field)}"))
        guard case .failure(let problem) = HookDecision.subscribe(answer, asked: .none), problem.code == .forbidden else {
            Issue.record("\(field) was not a refusal")
            return
        }
    }

    @Test func refreshAnswers() {
        #expect(HookDecision.refresh(.answered(status: 200, body: parsed(#"{"expiresAt":200}"#)), nowSeconds: 100) == .extend(until: 200))
        #expect(HookDecision.refresh(.answered(status: 200, body: parsed(#"{"expiresAt":null}"#)), nowSeconds: 100) == .extend(until: .infinity))
        #expect(HookDecision.refresh(.answered(status: 200, body: parsed(#"{"expiresAt":50}"#)), nowSeconds: 100)
            == .refuse("the refresh hook's grant has expired"))
        #expect(HookDecision.refresh(.answered(status: 403, body: parsed(#"{"reason":"gone"}"#)), nowSeconds: 0) == .refuse("gone"))
        guard case .unavailable = HookDecision.refresh(.answered(status: 200, body: parsed("{}")), nowSeconds: 0) else {
            Issue.record("an answer without expiresAt extended or refused")
            return
        }
    }

    @Test func rpcAnswers() {
        #expect(HookDecision.rpc(.answered(status: 200, body: parsed("[1]"))) == .result(parsed("[1]")))
        #expect(HookDecision.rpc(.answered(status: 200, body: nil)) == .result(.null))
        #expect(HookDecision.rpc(.answered(status: 403, body: nil)) == .error(code: "forbidden", message: "refused by the rpc hook"))
        #expect(HookDecision.rpc(.answered(status: 404, body: parsed(#"{"reason":"no such method"}"#)))
            == .error(code: "rpc_failed", message: "no such method"))
        #expect(HookDecision.rpc(.unavailable("down")) == .error(code: "unavailable", message: "down"))
    }

    @Test func responsesAsAnswers() {
        #expect(HookClient.answer(.rpc, .answered(status: 503, body: [])) == .unavailable("the rpc hook answered 503"))
        #expect(HookClient.answer(.rpc, .failed(.timedOut)) == .unavailable("the rpc hook did not answer in time"))
        #expect(HookClient.answer(.rpc, .answered(status: 200, body: Array("nope".utf8)))
            == .unavailable("the rpc hook answered something that is not JSON"))
        #expect(HookClient.answer(.rpc, .answered(status: 200, body: Array("{}".utf8))) == .answered(status: 200, body: parsed("{}")))
    }
}
