import Testing
import ReceptionistJSON
import ReceptionistWire

@Suite struct JSONWebTokenTests {
    let secret = Array("test-secret".utf8)
    let now = 1_800_000_000.0

    private func token(_ payload: JSONValue, secret: [UInt8]? = nil) -> String {
        JSONWebToken.sign(payload, secret: secret ?? self.secret)
    }

    @Test func acceptsASignedTokenAndReadsItsClaims() throws {
        let text = token(["sub": "alice", "exp": .number(JSONNumber(now + 60)), "stores": ["tiles"], "topics": ["news.*"]])
        let claims = try JSONWebToken.verify(text, secret: secret, now: now).get()
        #expect(claims == TokenClaims(subject: "alice", expiresAt: now + 60, stores: ["tiles"], topics: ["news.*"]))
        #expect(claims.allows(.store("tiles")))
        #expect(!claims.allows(.store("other")))
        #expect(claims.allows(.topic("news.sport")))
        #expect(!claims.allows(.topic("news")))
        #expect(!claims.allows(.topic("weather")))
    }

    @Test func aPublishClaimNamesTheTopicsItsHolderMayPublishTo() throws {
        let text = token(["exp": .number(JSONNumber(now + 60)), "topics": ["*"], "publish": ["news.*", "alerts"]])
        let claims = try JSONWebToken.verify(text, secret: secret, now: now).get()
        #expect(claims.publish == ["news.*", "alerts"])
        #expect(claims.allowsPublishing(to: "news.sport") && claims.allowsPublishing(to: "alerts"))
        #expect(!claims.allowsPublishing(to: "news") && !claims.allowsPublishing(to: "sport"))
        let reader = try JSONWebToken.verify(token(["exp": .number(JSONNumber(now + 60)), "topics": ["*"]]), secret: secret, now: now).get()
        #expect(!reader.allowsPublishing(to: "news.sport"), "reading is not publishing")
        guard case .failure = JSONWebToken.verify(token(["exp": .number(JSONNumber(now + 60)), "publish": "news"]), secret: secret, now: now) else {
            Issue.record("a publish claim that is not a list was accepted")
            return
        }
    }

    @Test func presenceAndInfoClaimsSayWhoMayFollowAndWhatOthersSee() throws {
        let payload: JSONValue = [
            "sub": "ann", "exp": .number(JSONNumber(now + 60)), "topics": ["*"], "presence": ["chat.*", "lobby"],
            "info": ["name": "Ann", "seat": 3],
        ]
        let claims = try JSONWebToken.verify(token(payload), secret: secret, now: now).get()
        #expect(claims.allowsPresence(of: .topic("chat.room")) && claims.allowsPresence(of: .store("lobby")))
        #expect(!claims.allowsPresence(of: .topic("chat")) && !claims.allowsPresence(of: .topic("news")))
        #expect(claims.info.map { String(decoding: $0, as: UTF8.self) } == #"{"name":"Ann","seat":3}"#,
                "info travels as written, compacted")
        let plain = try JSONWebToken.verify(token(["exp": .number(JSONNumber(now + 60)), "topics": ["*"]]), secret: secret, now: now).get()
        #expect(plain.info == nil && !plain.allowsPresence(of: .topic("chat")), "no claim, no presence")

        let big = JSONValue.object(["text": .string(String(repeating: "x", count: TokenClaims.maxInfoBytes))])
        for bad: JSONValue in ["a string", [1, 2], big] {
            let text = token(["exp": .number(JSONNumber(now + 60)), "info": bad])
            guard case .failure = JSONWebToken.verify(text, secret: secret, now: now) else {
                Issue.record("an info claim \(bad) was accepted")
                continue
            }
        }
    }

    /// `info` reaches presence as its writer wrote it: escapes, number spellings and repeated
    /// members kept, only the whitespace outside strings dropped. Before, it was parsed and
    /// written again (`Ren\u00e9e` became `Renée`, `{"x":1,"x":2}` became `{"x":2}`).
    @Test func theInfoClaimIsKeptAsWritten() throws {
        let payload = #"{"exp": 1900000000, "topics": ["*"], "info": {"n": "Ren\u00e9e", "x": 1, "x": 2.50}}"#
        let head = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let body = Base64URL.encode(Array(payload.utf8))
        let mac = Base64URL.encode(HMACSHA256.mac(key: secret, message: Array("\(head).\(body)".utf8)))
        let claims = try JSONWebToken.verify("\(head).\(body).\(mac)", secret: secret, now: now).get()
        #expect(claims.info.map { String(decoding: $0, as: UTF8.self) } == #"{"n":"Ren\u00e9e","x":1,"x":2.50}"#)
    }

    @Test func wildcardCoversEveryName() throws {
        let claims = try JSONWebToken.verify(token(["exp": .number(JSONNumber(now + 1)), "stores": ["*"]]), secret: secret, now: now).get()
        #expect(claims.allows(.store("anything")))
        #expect(!claims.allows(.topic("anything")), "a kind the token does not list is not readable")
    }

    @Test func publishedExampleVerifiesItsSignatureThenNeedsExp() {
        // The widely published HS256 example: correct signature, but no `exp` claim.
        let example = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
        let right = JSONWebToken.verify(example, secret: Array("your-256-bit-secret".utf8), now: now)
        #expect(right == .failure(.malformed("the token needs a numeric \"exp\" claim")))
        let wrong = JSONWebToken.verify(example, secret: Array("another secret".utf8), now: now)
        #expect(wrong == .failure(.badSignature))
    }

    @Test func refusesExpiredAndNotYetValid() {
        #expect(JSONWebToken.verify(token(["exp": .number(JSONNumber(now))]), secret: secret, now: now) == .failure(.expired))
        #expect(JSONWebToken.verify(token(["exp": .number(JSONNumber(now - 1))]), secret: secret, now: now).failureCode == "token_expired")
        #expect(JSONWebToken.verify(token(["exp": .number(JSONNumber(now + 10)), "nbf": .number(JSONNumber(now + 5))]), secret: secret, now: now)
            == .failure(.notYetValid))
    }

    @Test func refusesOtherSecretsAndTampering() {
        let text = token(["exp": .number(JSONNumber(now + 60)), "stores": ["tiles"]])
        #expect(JSONWebToken.verify(text, secret: Array("other".utf8), now: now) == .failure(.badSignature))
        let parts = text.split(separator: ".").map(String.init)
        let forged = Base64URL.encode(Array("{\"exp\":9999999999,\"stores\":[\"*\"]}".utf8))
        #expect(JSONWebToken.verify(parts[0] + "." + forged + "." + parts[2], secret: secret, now: now) == .failure(.badSignature))
    }

    @Test func refusesAlgorithmNoneAndOthers() {
        for alg in ["none", "HS512", "RS256"] {
            let header = Base64URL.encode(Array("{\"alg\":\"\(alg)\"}".utf8))
            let body = Base64URL.encode(Array("{\"exp\":9999999999}".utf8))
            #expect(JSONWebToken.verify(header + "." + body + ".", secret: secret, now: now) == .failure(.unsupportedAlgorithm(alg)))
        }
    }

    @Test func refusesMalformedShapes() {
        for text in ["", "a", "a.b", "a.b.c.d", "!!.e30.", String(repeating: "a", count: 5000)] {
            guard case .failure(.malformed) = JSONWebToken.verify(text, secret: secret, now: now) else {
                Issue.record("\(text.prefix(20)) was not refused as malformed")
                continue
            }
        }
        let badClaims = token(["exp": .number(JSONNumber(now + 60)), "stores": "tiles"])
        #expect(JSONWebToken.verify(badClaims, secret: secret, now: now) == .failure(.malformed("\"stores\" must be an array of names")))
    }

    /// A claim of the wrong type is refused, not read as absent: a future `nbf` written as a
    /// string let the token in early, and a `sub` that is not a string made its holder anonymous.
    @Test func refusesClaimsOfTheWrongType() {
        let exp: JSONValue = .number(JSONNumber(now + 60))
        #expect(JSONWebToken.verify(token(["exp": exp, "nbf": .string(String(Int(now + 30)))]), secret: secret, now: now)
            == .failure(.malformed("\"nbf\" must be a number")))
        #expect(JSONWebToken.verify(token(["exp": exp, "sub": 42]), secret: secret, now: now) == .failure(.malformed("\"sub\" must be a string")))
        #expect((try? JSONWebToken.verify(token(["exp": exp, "nbf": .null, "sub": .null]), secret: secret, now: now).get()) != nil)
    }

    /// RFC 7515 section 4.1.11: a token that names critical extensions is refused.
    @Test func refusesCriticalExtensions() {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","crit":["exp2"],"exp2":1}"#.utf8))
        let body = Base64URL.encode(Array(#"{"exp":9999999999}"#.utf8))
        let input = header + "." + body
        let signed = input + "." + Base64URL.encode(HMACSHA256.mac(key: secret, message: Array(input.utf8)))
        #expect(JSONWebToken.verify(signed, secret: secret, now: now)
            == .failure(.malformed("the header's \"crit\" names extensions this gateway does not understand")))
    }
}

@Suite struct Base64URLTests {
    @Test func roundTripsEveryLengthWithoutPadding() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
    }

    @Test func refusesTheStandardAlphabetAndBadLengths() {
        #expect(Base64URL.decode("+w") == nil)
        #expect(Base64URL.decode("/w") == nil)
        #expect(Base64URL.decode("-w==") == nil)
        #expect(Base64URL.decode("abcde") == nil)
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }
}

extension Result where Failure == JSONWebToken.Failure {
    var failureCode: String? {
        if case .failure(let failure) = self { return failure.code.rawValue }
        return nil
    }
}
