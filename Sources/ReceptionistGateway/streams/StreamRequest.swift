import ReceptionistPush
import ReceptionistWire

/// An SSE request: where it resumes from, from `Last-Event-ID` or, for the first `EventSource`
/// request, which cannot set headers, `?since=`.
enum StreamRequest {
    /// Checks the target and the resume point; answers 4xx for what cannot be streamed.
    static func route(_ request: HTTPRequest, target: StreamTarget, hub: PushHub, grant: StreamGrant) -> RouteResult {
        if let problem = hub.check(target) {
            return .reply(.error(problem.code == .noSuchStore ? .notFound : .badRequest, problem.message))
        }
        let text = request.headers["Last-Event-ID"] ?? query(request, "since")
        let epoch = query(request, "epoch").flatMap { $0.isEmpty ? nil : $0 }
        guard let text, !text.isEmpty else { return .stream(target, since: nil, epoch: epoch, grant: grant) }
        guard let since = UInt64(text.trimmingSpaces) else {
            return .reply(.error(.badRequest, "Last-Event-ID or since must be a whole number, not '\(text)'"))
        }
        return .stream(target, since: since, epoch: epoch, grant: grant)
    }

    /// The first value of `name` in the query string, undecoded (numbers need no decoding).
    static func query(_ request: HTTPRequest, _ name: String) -> String? {
        guard let query = request.query else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.first == Substring(name) { return parts.count > 1 ? String(parts[1]) : "" }
        }
        return nil
    }
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        var text = self[...]
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
