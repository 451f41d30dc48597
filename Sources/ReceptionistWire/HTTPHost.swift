/// The `Host` header as RFC 9112 §3.2 requires it: an HTTP/1.1 request carries exactly one, an
/// HTTP/1.0 request at most one, and its value is `uri-host [ ":" port ]` (RFC 3986): a bracketed
/// IP literal, or a registered name or IPv4 address, then a port of decimal digits up to 65535.
/// The host may not be empty: an `http` URI with an empty host is invalid, and its recipient
/// must reject it (RFC 9110 §4.2.1). Anything else is answered 400, so that no Host two parties
/// could read differently (a proxy and this gateway) is taken.
///
/// Pure value.
public enum HTTPHost {
    /// Why the request's Host field lines are not acceptable, or nil: `count` of them, the first
    /// with the value `first`. `required` for HTTP/1.1 and later.
    public static func problem(count: Int, first: String?, required: Bool) -> String? {
        switch (count, first) {
        case (0, _): return required ? "an HTTP/1.1 request needs a Host header" : nil
        case (1, let value?): return isValid(value) ? nil : "the Host header is not a host and an optional port"
        default: return "more than one Host header"
        }
    }

    /// Whether `value` (spaces and tabs around it aside) is `uri-host [ ":" port ]`.
    public static func isValid(_ value: String) -> Bool {
        // Read and trimmed in place: every request's Host is checked, and a copy into an array
        // cost it as much again as the check.
        var value = value
        return value.withUTF8 { all in
            var start = 0
            var end = all.count
            while end > start, all[end - 1] == 0x20 || all[end - 1] == 0x09 { end -= 1 }
            while start < end, all[start] == 0x20 || all[start] == 0x09 { start += 1 }
            return isValid(UnsafeBufferPointer(rebasing: all[start..<end]))
        }
    }

    private static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1,
                  isIPLiteral(bytes[1..<close]) else { return false }
            index = close + 1
        } else {
            while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
                let byte = bytes[index]
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < bytes.count, isHex(bytes[index + 1]), isHex(bytes[index + 2]) else { return false }
                    index += 3
                    continue
                }
                guard isUnreserved(byte) || isSubDelimiter(byte) else { return false }
                index += 1
            }
        }
        guard index > 0 else { return false }
        guard index < bytes.count else { return true }
        guard bytes[index] == UInt8(ascii: ":") else { return false }
        // An empty port is the scheme's default (RFC 3986 §6.2.3); a number is at most 65535.
        let port = bytes[(index + 1)...]
        guard port.count <= 5 else { return false }
        var number = 0
        for byte in port {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return false }
            number = number * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return number <= 65_535
    }

    /// The inside of `[...]`: an IPv6 address (hex digits, colons, and dots for an embedded
    /// IPv4 address; a zone is not allowed in a URI), or `v<hex>.<...>` (IPvFuture).
    private static func isIPLiteral(_ inner: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        if let first = inner.first, first == UInt8(ascii: "v") || first == UInt8(ascii: "V") {
            guard let dot = inner.firstIndex(of: UInt8(ascii: ".")), dot > inner.startIndex + 1, dot < inner.endIndex - 1
            else { return false }
            return inner[(inner.startIndex + 1)..<dot].allSatisfy(isHex)
                && inner[(dot + 1)...].allSatisfy { isUnreserved($0) || isSubDelimiter($0) || $0 == UInt8(ascii: ":") }
        }
        return inner.contains(UInt8(ascii: ":"))
            && inner.allSatisfy { isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }

    private static func isSubDelimiter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default: false
        }
    }
}
