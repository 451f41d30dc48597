/// Base64url without padding (RFC 4648 section 5), as JSON Web Tokens use it (RFC 7515 section 2).
public enum Base64URL {
    /// The bytes `text` encodes, or nil if it is not unpadded base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var standard: [UInt8] = []
        standard.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            // The standard alphabet's own symbols and padding are not base64url.
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil
            default: standard.append(byte)
            }
        }
        switch standard.count % 4 {
        case 0: break
        case 2: standard.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")])
        case 3: standard.append(UInt8(ascii: "="))
        default: return nil
        }
        return Base64.decode(String(decoding: standard, as: UTF8.self))
    }

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        for byte in Base64.encode(bytes).utf8 {
            switch byte {
            case UInt8(ascii: "+"): out.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): break
            default: out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
