extension HTTPRequestParser {
    /// Rejects the header combinations that let two parties disagree on where a message ends:
    /// `lengthCount` Content-Length fields, and the Transfer-Encoding values `codings`, in an
    /// HTTP/1.`minor` request.
    static func framingProblem(lengthCount: Int, codings: [String], minor: Int) -> HTTPParseError? {
        guard lengthCount > 0 || !codings.isEmpty else { return nil }
        if minor == 0 && !codings.isEmpty {
            // HTTP/1.0 has no transfer codings: its framing is faulty (RFC 9112, section 6.1).
            return HTTPParseError(status: .badRequest, detail: "Transfer-Encoding in an HTTP/1.0 request")
        }
        if lengthCount > 1 {
            return HTTPParseError(status: .badRequest, detail: "more than one Content-Length header")
        }
        if lengthCount > 0 && !codings.isEmpty {
            return HTTPParseError(status: .badRequest, detail: "both Content-Length and Transfer-Encoding are present")
        }
        let tokens = codings.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces() }
        if let unknown = tokens.first(where: { !String($0).asciiCaseInsensitiveEquals("chunked") }) {
            return HTTPParseError(status: .notImplemented, detail: "transfer coding '\(unknown)' is not supported")
        }
        if tokens.count > 1 {
            return HTTPParseError(status: .badRequest, detail: "chunked is applied more than once")
        }
        return nil
    }
}

extension HTTPRequestParser {
    /// Whether a Connection field's value names the `close` option among its comma-separated ones.
    static func namesClose(_ value: String) -> Bool {
        if value.asciiCaseInsensitiveEquals("close") { return true }
        guard value.utf8.contains(UInt8(ascii: ",")) else { return false }
        return value.split(separator: ",").contains { String($0.trimmingSpaces()).asciiCaseInsensitiveEquals("close") }
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let first = s.first, first == " " || first == "\t" { s = s.dropFirst() }
        while let last = s.last, last == " " || last == "\t" { s = s.dropLast() }
        return s
    }
}
