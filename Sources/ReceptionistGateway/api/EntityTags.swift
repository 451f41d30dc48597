import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// Conditional requests: a model's entity tag (`ETag: "17"`, the store version of its last
/// change) and the conditions `If-Match`, `If-None-Match`, `ifVersion` and `ifMatch` that a write
/// carries. Pure.
enum EntityTags {
    /// The `ETag` header value of a model last changed at `version`.
    static func tag(_ version: UInt64) -> String { "\"\(version)\"" }

    /// The condition of a model write's headers, or why they are malformed.
    static func condition(of request: HTTPRequest, model id: String) -> Result<CommitCondition, ReplyError> {
        var condition = CommitCondition()
        if let header = request.headers["If-Match"] {
            switch parseList(header) {
            case .some(nil): condition.models[id] = .exists
            case .some(let tags?): condition.models[id] = .version(tags)
            case nil: return .failure(bad("If-Match"))
            }
        }
        if let header = request.headers["If-None-Match"] {
            guard header.trimmingSpaces == "*" else {
                return .failure(ReplyError(.error(.badRequest, "If-None-Match is supported as * only (create, never replace)")))
            }
            guard request.method == .put else {
                return .failure(ReplyError(.error(.badRequest, "If-None-Match: * applies to PUT")))
            }
            condition.models[id] = .absent
        }
        return .success(condition)
    }

    /// The condition of a `changes` body: `ifVersion` and `ifMatch`.
    static func condition(of body: JSONValue) -> Result<CommitCondition, ReplyError> {
        var condition = CommitCondition()
        if let value = body["ifVersion"] {
            guard let version = value.uint64Value else {
                return .failure(ReplyError(.error(.badRequest, "\"ifVersion\" must be a version number")))
            }
            condition.storeVersion = version
        }
        if let value = body["ifMatch"] {
            guard case .object(let members) = value else {
                return .failure(ReplyError(.error(.badRequest, "\"ifMatch\" must map model ids to entity tags")))
            }
            for (id, tag) in members {
                if let number = tag.uint64Value {
                    condition.models[id] = .version([number])
                } else if let text = tag.stringValue, let parsed = parseList(text) {
                    condition.models[id] = parsed.map { .version($0) } ?? .exists
                } else {
                    return .failure(ReplyError(.error(.badRequest, "\"ifMatch\" of '\(id)' must be an entity tag like \"17\"")))
                }
            }
        }
        return .success(condition)
    }

    /// An `If-Match` list: nil when malformed, `.some(nil)` for `*`, else the versions (a weak
    /// tag never matches: `If-Match` compares strongly). A bare number is taken as its tag.
    static func parseList(_ text: String) -> [UInt64]?? {
        let trimmed = text.trimmingSpaces
        if trimmed == "*" { return .some(nil) }
        var tags: [UInt64] = []
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            var item = Substring(String(part).trimmingSpaces)
            if item.hasPrefix("W/") { continue }
            if item.count >= 2, item.first == "\"", item.last == "\"" { item = item.dropFirst().dropLast() }
            guard !item.isEmpty, item.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let version = UInt64(item)
            else {
                // A tag this gateway never gives out matches nothing: kept, as a version no model has.
                if item.isEmpty { return nil }
                tags.append(.max)
                continue
            }
            tags.append(version)
        }
        return tags.isEmpty ? .some([.max]) : .some(tags)
    }

    private static func bad(_ header: String) -> ReplyError {
        ReplyError(.error(.badRequest, "\(header) must be * or entity tags like \"17\""))
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
