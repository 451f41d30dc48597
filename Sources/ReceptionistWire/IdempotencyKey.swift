/// The `Idempotency-Key` a publisher sends so that a retry is answered from its first attempt.
/// A pure value: 1 to 255 visible ASCII characters (0x21–0x7E).
public struct IdempotencyKey: Sendable, Hashable {
    public let text: String

    public static let maxLength = 255

    /// The key in `header`, or nil if it is not a valid one.
    public init?(header: String) {
        let bytes = Array(header.utf8)
        guard (1...Self.maxLength).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        text = header
    }

    /// What identifies a request under one key: its method, target and body, hashed (a retry must
    /// be the same request; the table keeps 32 bytes of it, not the body).
    public static func fingerprint(method: String, target: String, body: [UInt8]) -> [UInt8] {
        var message = Array(method.utf8)
        message.append(0x20)
        message += target.utf8
        message.append(0x0A)
        message += body
        return HMACSHA256.mac(key: Array("receptionist idempotency".utf8), message: message)
    }
}
