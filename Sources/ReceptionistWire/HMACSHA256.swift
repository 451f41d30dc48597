import COpenSSL

/// HMAC-SHA-256 through libcrypto: signs and checks subscription tokens (JWT HS256).
public enum HMACSHA256 {
    public static let byteCount = 32

    public static func mac(key: [UInt8], message: some Collection<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let bytes = Array(message)
        // An empty key is legal for HMAC, but libcrypto wants a non-null pointer all the same.
        let keyBytes = key.isEmpty ? [0] : key
        keyBytes.withUnsafeBufferPointer { keyBuffer in
            bytes.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { output in
                    _ = HMAC(
                        EVP_sha256(), keyBuffer.baseAddress, Int32(key.count),
                        input.baseAddress, input.count, output.baseAddress, &length)
                }
            }
        }
        precondition(length == UInt32(byteCount), "HMAC-SHA-256 always yields 32 bytes")
        return out
    }
}
