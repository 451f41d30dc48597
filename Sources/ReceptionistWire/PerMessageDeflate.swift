/// The server's side of negotiating permessage-deflate (RFC 7692 section 7.1): which of the
/// client's offers it accepts, and what it answers. Pure.
///
/// The server always answers `server_no_context_takeover` and `client_no_context_takeover`:
/// every message is compressed and inflated on its own, so a broadcast is compressed once for
/// every subscriber, and one inflating stream serves every connection (a connection keeps no
/// zlib window, about 40 KiB otherwise). RFC 7692 lets a server add both to any offer
/// (sections 7.1.1.1 and 7.1.1.2), and every client must honour them.
public struct PerMessageDeflate: Sendable, Equatable {
    /// The extension's registered name.
    public static let name = "permessage-deflate"

    /// The window our compressor may use: 15, or less when the offer asked for less.
    public let serverMaxWindowBits: Int
    /// The `Sec-WebSocket-Extensions` value of the 101 response.
    public let response: String

    /// The window the gateway compresses with: 15, or 9 for any smaller window asked (a window
    /// below the one asked is always allowed). A message is then compressed at most twice, however
    /// many windows its subscribers ask for: each window was one more compression of every message,
    /// on the loop, for whoever asked.
    public var compressionWindowBits: Int { serverMaxWindowBits < 15 ? 9 : 15 }

    /// `asked`: the offer named `server_max_window_bits`, which the answer must then carry, 15
    /// included (RFC 7692 section 7.1.2.1); without it the window is 15 and goes unsaid.
    public init(serverMaxWindowBits: Int, asked: Bool = false) {
        self.serverMaxWindowBits = serverMaxWindowBits
        var response = "\(Self.name); server_no_context_takeover; client_no_context_takeover"
        if asked || serverMaxWindowBits < 15 {
            response += "; server_max_window_bits=\(serverMaxWindowBits)"
        }
        self.response = response
    }

    /// The first offer in the client's `Sec-WebSocket-Extensions` values that the server can
    /// accept, or nil to send uncompressed frames. An offer is declined when a parameter is
    /// unknown, repeated or has an invalid value (section 7.1), or when it limits our window to
    /// 8 bits, which raw deflate in zlib cannot produce; the next offer is then considered.
    public static func negotiate(_ headerValues: [String]) -> PerMessageDeflate? {
        for value in headerValues {
            for offer in value.split(separator: ",") {
                if let accepted = accept(offer) { return accepted }
            }
        }
        return nil
    }

    /// One offer, `permessage-deflate; param; param=value`, or nil if it is another extension or
    /// one we decline.
    private static func accept(_ offer: Substring) -> PerMessageDeflate? {
        let parts = offer.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
        guard let first = parts.first, String(first).asciiCaseInsensitiveEquals(name) else { return nil }
        var seen: Set<String> = []
        var serverBits = 15
        var serverBitsAsked = false
        for part in parts.dropFirst() {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(pieces[0].trimmingSpaces()).lowercased()
            var value: Substring? = pieces.count == 2 ? pieces[1].trimmingSpaces() : nil
            // A value may be a quoted string (RFC 7692 section 7.1, RFC 6455 section 9.1).
            if let quoted = value, quoted.count >= 2, quoted.first == "\"", quoted.last == "\"" {
                value = quoted.dropFirst().dropLast()
            }
            guard seen.insert(key).inserted else { return nil }
            switch key {
            case "server_no_context_takeover", "client_no_context_takeover":
                guard value == nil else { return nil }
            case "server_max_window_bits":
                guard let value, let bits = windowBits(value), bits >= 9 else { return nil }
                serverBits = bits
                serverBitsAsked = true
            case "client_max_window_bits":
                // The client may limit its own window; our inflater takes any window, so no answer.
                if let value, windowBits(value) == nil { return nil }
            default:
                return nil
            }
        }
        return PerMessageDeflate(serverMaxWindowBits: serverBits, asked: serverBitsAsked)
    }

    /// 8...15 written without leading zeros, as section 7.1.2.1 requires.
    private static func windowBits(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.first != "0", text.allSatisfy({ $0.isASCII && $0.isNumber }),
              let bits = Int(text), (8...15).contains(bits) else { return nil }
        return bits
    }
}
