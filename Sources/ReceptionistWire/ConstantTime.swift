import COpenSSL

/// Comparisons whose running time does not depend on where two secrets differ.
public enum ConstantTime {
    /// A fixed key: the comparison only needs both sides mapped through the same keyed function.
    private static let key = Array("receptionist constant-time comparison".utf8)

    /// Whether `a` equals `b`, taking the same time wherever they differ and whatever their lengths:
    /// both are first reduced to HMACs of equal size, which `CRYPTO_memcmp` then compares in full.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let left = HMACSHA256.mac(key: key, message: a)
        let right = HMACSHA256.mac(key: key, message: b)
        return left.withUnsafeBytes { l in
            right.withUnsafeBytes { r in CRYPTO_memcmp(l.baseAddress, r.baseAddress, HMACSHA256.byteCount) == 0 }
        }
    }
}
