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
        // Lines of one list field are one list (RFC 9110 §5.3).
        let lines = request.headers.values("If-Match")
        if !lines.isEmpty {
            switch parseList(lines.joined(separator: ", ")) {
            case .some(nil): condition.models[id] = .exists
            case .some(let tags?): condition.models[id] = .version(tags)
            case nil: return .failure(bad("If-Match"))
            }
        }
        if let header = request.headers[.ifNoneMatch] {
            guard header.trimmingSpaces == "*" else {
                return .failure(ReplyError(.error(.badRequest, "If-None-Match is supported as * only (create, never replace)")))
            }
            guard request.method == .put else {
                return .failure(ReplyError(.error(.badRequest, "If-None-Match: * applies to PUT")))
            }
            // No model is both there (If-Match) and absent; taken one after the other, the
            // second replaced the first, and the write went ahead on half its condition.
            guard lines.isEmpty else {
                return .failure(ReplyError(.error(.badRequest, "If-Match and If-None-Match: * cannot both hold; send one")))
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
                // A condition on a model that can never exist is a mistake, not a 412.
                guard ModelStore.isValidModelID(id) else {
                    return .failure(ReplyError(.error(StoreError.invalidModelID(id))))
                }
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

    /// An `If-Match` list (RFC 9110 §8.8.3, §13.1.1): nil when malformed, `.some(nil)` for `*`,
    /// else the versions its tags name. Empty elements are skipped, as a list's may be. A weak
    /// tag (`W/"17"`) never matches: `If-Match` compares strongly. Tags compare as text, so only
    /// this gateway's own form of a number (`"17"`, not `"017"`) names a version; any other tag
    /// matches nothing. A bare number is taken as its tag (`17` for `"17"`).
    static func parseList(_ text: String) -> [UInt64]?? {
        if text.trimmingSpaces == "*" { return .some(nil) }
        var tags: [UInt64] = []
        var elements = 0
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = Substring(String(part).trimmingSpaces)
            if item.isEmpty { continue }
            elements += 1
            var opaque = item
            let weak = opaque.hasPrefix("W/")
            if weak { opaque = opaque.dropFirst(2) }
            if opaque.count >= 2, opaque.first == "\"", opaque.last == "\"" {
                opaque = opaque.dropFirst().dropLast()
                // etagc: any visible character but the quote, and bytes past ASCII.
                guard opaque.utf8.allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) }) else { return nil }
            } else if weak || !isCanonicalNumber(opaque) {
                return nil
            }
            if weak { continue }
            // A tag this gateway never gives out matches nothing: kept, as a version no model has.
            tags.append(isCanonicalNumber(opaque) ? UInt64(opaque) ?? .max : .max)
        }
        guard elements > 0 else { return nil }
        return tags.isEmpty ? .some([.max]) : .some(tags)
    }

    /// Digits as this gateway writes a version: no sign, no leading zero, within 64 bits.
    private static func isCanonicalNumber(_ text: Substring) -> Bool {
        guard let first = text.utf8.first, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return false
        }
        return (first != UInt8(ascii: "0") || text.utf8.count == 1) && UInt64(text) != nil
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
