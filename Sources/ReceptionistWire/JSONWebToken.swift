import ReceptionistJSON

/// JSON Web Tokens signed with HS256 (RFC 7519, RFC 7515): checked here, issued by the backend.
///
/// A pure codec: the secret and the time are given. Only `HS256` is accepted, so a token can
/// never choose a weaker algorithm (`none`) or confuse a public key for a secret.
public enum JSONWebToken {
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case malformed(String)
        case unsupportedAlgorithm(String)
        case badSignature
        case expired
        case notYetValid

        /// The protocol's error code for this failure.
        public var code: ClientMessage.Problem.Code {
            switch self {
            case .expired: .tokenExpired
            default: .tokenInvalid
            }
        }

        public var description: String {
            switch self {
            case .malformed(let detail): "malformed token: \(detail)"
            case .unsupportedAlgorithm(let alg): "unsupported token algorithm '\(alg)'; only HS256 is accepted"
            case .badSignature: "the token's signature does not match"
            case .expired: "the token has expired"
            case .notYetValid: "the token is not valid yet"
            }
        }
    }

    /// Tokens longer than this are refused before any work is done on them.
    public static let maxBytes = 4096

    /// Checks the signature first, then the claims, with `now` in seconds since the Unix epoch.
    public static func verify(_ token: String, secret: [UInt8], now: Double) -> Result<TokenClaims, Failure> {
        do {
            return .success(try check(token, secret: secret, now: now))
        } catch {
            return .failure(error)
        }
    }

    private static func check(_ token: String, secret: [UInt8], now: Double) throws(Failure) -> TokenClaims {
        let bytes = Array(token.utf8)
        guard bytes.count <= maxBytes else { throw .malformed("longer than \(maxBytes) bytes") }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("a token has three dot-separated parts") }
        guard let header = decodeJSON(parts[0])?.0 else { throw .malformed("the header is not base64url JSON") }
        guard let algorithm = header["alg"]?.stringValue else { throw .malformed("the header names no \"alg\"") }
        guard algorithm == "HS256" else { throw .unsupportedAlgorithm(algorithm) }
        // RFC 7515 section 4.1.11: extensions named critical must be understood; none is here.
        guard header["crit"] == nil else { throw .malformed("the header's \"crit\" names extensions this gateway does not understand") }
        guard let signature = Base64URL.decode(String(decoding: parts[2], as: UTF8.self)) else {
            throw .malformed("the signature is not base64url")
        }
        let signed = bytes[..<(parts[0].count + 1 + parts[1].count)]
        guard ConstantTime.equal(HMACSHA256.mac(key: secret, message: signed), signature) else { throw .badSignature }
        // Only a genuine token's payload is parsed.
        guard let (payload, text) = decodeJSON(parts[1]) else { throw .malformed("the payload is not base64url JSON") }
        let claims = try TokenClaims(payload: payload, text: text)
        if let notBefore = payload["nbf"], notBefore != .null {
            guard let seconds = notBefore.numberValue, seconds.isFinite else { throw .malformed("\"nbf\" must be a number") }
            if now < seconds { throw .notYetValid }
        }
        guard now < claims.expiresAt else { throw .expired }
        return claims
    }

    /// The payload, and its text compacted (what its claims are read from as written).
    private static func decodeJSON(_ part: ArraySlice<UInt8>) -> (JSONValue, [UInt8])? {
        guard let raw = Base64URL.decode(String(decoding: part, as: UTF8.self)),
              let text = try? JSONParser.compact(raw), let value = try? JSONParser.parse(text)
        else { return nil }
        return (value, text)
    }

    /// Signs `payload` (for tests and tools; the gateway only verifies).
    public static func sign(_ payload: JSONValue, secret: [UInt8]) -> String {
        let header = Base64URL.encode(Array("{\"alg\":\"HS256\",\"typ\":\"JWT\"}".utf8))
        let body = Base64URL.encode(JSONWriter.encode(payload))
        let signingInput = header + "." + body
        return signingInput + "." + Base64URL.encode(HMACSHA256.mac(key: secret, message: Array(signingInput.utf8)))
    }
}
