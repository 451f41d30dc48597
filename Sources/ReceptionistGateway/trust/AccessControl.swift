import ReceptionistModel
import ReceptionistWire

/// Who may publish (API keys) and who may subscribe (signed tokens). Immutable; any thread.
struct AccessControl: Sendable {
    /// The configured API keys; empty means mutations are open (and the gateway stays on loopback).
    private let apiKeys: [[UInt8]]
    /// Each key's scope for idempotency keys: a digest of the key, the same on every node that
    /// has it, and no use to anyone who reads it.
    private let scopes: [String]
    /// The HS256 secret subscription tokens are checked with; nil means subscriptions are open.
    private let tokenSecret: [UInt8]?
    /// Whether a connection that brings no token is admitted by the connect hook instead.
    let connectHook: Bool

    init(apiKeys: [String], tokenSecret: String?, connectHook: Bool = false) {
        self.connectHook = connectHook
        self.apiKeys = apiKeys.map { Array($0.utf8) }
        scopes = self.apiKeys.map { key in
            HMACSHA256.mac(key: Array("receptionist scope".utf8), message: key).prefix(12).map { byte in
                String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
            }.joined()
        }
        self.tokenSecret = tokenSecret.map { Array($0.utf8) }
    }

    var requiresAPIKey: Bool { !apiKeys.isEmpty }
    /// Whether subscription tokens are checked (a secret is set).
    var tokenSecretSet: Bool { tokenSecret != nil }
    /// Whether streams need an identity: a token's, or one the connect hook gives.
    var requiresToken: Bool { tokenSecret != nil || connectHook }

    enum KeyCheck: Equatable {
        /// Allowed; the identity that publish rates are counted against, and the scope of its
        /// idempotency keys (empty without API keys: one scope for everyone).
        case allowed(rateKey: String, scope: String)
        /// No valid credential (401).
        case refused(String)
        /// A valid token that does not grant this write (403).
        case forbidden(String)
    }

    /// Checks `Authorization: Bearer <key>` on a mutating request. Every configured key is compared,
    /// each in constant time, so the time taken does not tell which key, or which byte, was close.
    ///
    /// A write to a store's models (`grantable` `.store`) or a publish to a topic (`.topic`) may
    /// instead carry a subscription token whose `write` (or `publish`) claim covers it: how a
    /// browser writes without holding the API key. Its rate and idempotency keys are counted by
    /// the token's `sub`.
    func checkKey(_ request: HTTPRequest, client: String, grantable: StreamTarget? = nil) -> KeyCheck {
        guard requiresAPIKey else { return .allowed(rateKey: client, scope: "") }
        guard let presented = Self.bearer(request.headers[.authorization]) else {
            return .refused("this call needs an API key or a token that grants it: send Authorization: Bearer <credential>")
        }
        let byKey = check(presented)
        guard case .refused = byKey, let grantable, requiresToken, presented.utf8.contains(UInt8(ascii: ".")) else { return byKey }
        switch checkToken(presented) {
        case .failure(let failure):
            return .refused("the token is not valid: \(failure.description)")
        case .success(let claims):
            let who = Self.tokenRateKeyPrefix + (claims.subject ?? "address " + client)
            switch grantable {
            case .store(let name) where claims.allowsWriting(to: name),
                 .topic(let name) where claims.allowsPublishing(to: name):
                return .allowed(rateKey: who, scope: who)
            case .store(let name):
                return .forbidden("the token does not grant writing to store '\(name)' (its \"write\" claim)")
            case .topic(let name):
                return .forbidden("the token does not grant publishing to topic '\(name)' (its \"publish\" claim)")
            }
        }
    }

    /// Checks an API key a WebSocket client presented in an `auth` message, as `checkKey` does a
    /// header: every key compared, each in constant time.
    func checkKey(presented: String) -> KeyCheck {
        guard requiresAPIKey else { return .allowed(rateKey: "", scope: "") }
        return check(presented)
    }

    private func check(_ presented: String) -> KeyCheck {
        let bytes = Array(presented.utf8)
        var match: Int?
        for (index, key) in apiKeys.enumerated() where ConstantTime.equal(key, bytes) {
            match = index
        }
        guard let match else { return .refused("the API key is not valid") }
        return .allowed(rateKey: "key \(match)", scope: scopes[match])
    }

    /// Checks a subscription token against the secret and the wall clock.
    func checkToken(_ token: String) -> Result<TokenClaims, JSONWebToken.Failure> {
        guard let tokenSecret else { return .failure(.malformed("no token secret is configured")) }
        return JSONWebToken.verify(token, secret: tokenSecret, now: Self.nowSeconds())
    }

    /// How a caller allowed by a token, not an API key, is named in its rate key.
    static let tokenRateKeyPrefix = "token "

    /// Sent before a stream whose token ran out is ended.
    static let expiredProblem = ClientMessage.Problem(.tokenExpired, "the subscription token has expired")

    static func nowSeconds() -> Double {
        Double(Clock.microsecondsSinceEpoch()) / 1_000_000
    }

    /// The credential of `Authorization: Bearer <credential>`.
    static func bearer(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        // RFC 9110 section 11.4: one or more spaces after the scheme.
        let credential = parts[1].drop { $0 == " " }
        return credential.isEmpty ? nil : String(credential)
    }
}
