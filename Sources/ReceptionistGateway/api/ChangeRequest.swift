import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// Decodes the body of `POST /api/stores/{store}/changes` into store operations.
///
/// `{"changes": [{"op": "put"|"patch"|"set"|"delete", "model": "...", "path": "a.b", "value": ...}]}`
enum ChangeRequest {
    /// The members a body may hold: a misspelt condition (`ifversion`) is refused, never ignored,
    /// for a change set applied without the condition its writer meant is a lost update.
    static let members: Set<String> = ["changes", "ifVersion", "ifMatch"]

    /// Refuses what a change set's request holds that the gateway would not act on: a member of
    /// the body it does not know, or a condition in a header (`If-Match` and `If-None-Match` are
    /// for one model's `PUT`, `PATCH` and `DELETE`; a change set's go in its body).
    static func refusal(body: JSONValue, headers: HTTPHeaders) -> ReplyError? {
        if let refusal = Reply.unknownMember(of: body, known: members, in: "a change set") { return refusal }
        for header in ["If-Match", "If-None-Match"] where headers[header] != nil {
            return ReplyError(.error(.badRequest, "\(header) is not read on a change set: put its conditions in the body, as \"ifVersion\" and \"ifMatch\""))
        }
        return nil
    }

    /// The members each operation takes. Any other is refused, never ignored: a `delete` with a
    /// `path` would delete the whole model, and a condition put inside an operation would not
    /// hold the change set back.
    static let operationMembers: [String: (names: Set<String>, listed: String)] = [
        "put": (["op", "model", "value"], "\"op\", \"model\" and \"value\""),
        "patch": (["op", "model", "value"], "\"op\", \"model\" and \"value\""),
        "set": (["op", "model", "path", "value"], "\"op\", \"model\", \"path\" and \"value\""),
        "delete": (["op", "model"], "\"op\" and \"model\""),
    ]

    static func operations(from body: JSONValue) -> Result<[StoreOperation], ReplyError> {
        guard case .array(let items)? = body["changes"] else {
            return .failure(ReplyError(.error(.badRequest, "expected {\"changes\": [...]}")))
        }
        guard !items.isEmpty else { return .failure(ReplyError(.error(.emptyCommit))) }
        var operations: [StoreOperation] = []
        for (index, item) in items.enumerated() {
            func bad(_ detail: String) -> Result<[StoreOperation], ReplyError> {
                .failure(ReplyError(.error(.badRequest, "changes[\(index)]: \(detail)")))
            }
            guard let op = item["op"]?.stringValue else { return bad("missing \"op\"") }
            guard let model = item["model"]?.stringValue else { return bad("missing \"model\"") }
            if let takes = operationMembers[op], case .object(let given) = item,
                let unknown = given.keys.first(where: { !takes.names.contains($0) })
            {
                return bad("'\(op)' takes \(takes.listed), not '\(unknown)'")
            }
            switch op {
            case "put", "patch":
                guard let value = item["value"] else { return bad("missing \"value\"") }
                operations.append(op == "put" ? .put(model: model, value: value) : .patch(model: model, patch: value))
            case "set":
                guard let text = item["path"]?.stringValue, let keyPath = ModelKeyPath(parsing: text) else {
                    return bad("missing or malformed \"path\"")
                }
                guard let value = item["value"] else { return bad("missing \"value\"") }
                // `null` removes the member. Spelled out as an if: in `value == .null ? nil : value`
                // the `nil` is a JSONValue literal, `.null`, and a null would be stored.
                if value == .null {
                    operations.append(.set(model: model, keyPath: keyPath, value: Optional<JSONValue>.none))
                } else {
                    operations.append(.set(model: model, keyPath: keyPath, value: value))
                }
            case "delete":
                operations.append(.delete(model: model))
            default:
                return bad("unknown op '\(op)'; use put, patch, set or delete")
            }
        }
        return .success(operations)
    }
}
