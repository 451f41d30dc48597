extension HTTPRequestParser {
    /// Rejects the header combinations that let two parties disagree on where a message ends:
    /// `lengthCount` Content-Length fields, and the Transfer-Encoding values `codings`.
    static func framingProblem(lengthCount: Int, codings: [String]) -> HTTPParseError? {
        guard lengthCount > 0 || !codings.isEmpty else { return nil }
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
