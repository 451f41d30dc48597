import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// The writes of `/api/stores/...`: a model put, patched or deleted (with `If-Match` and
/// `If-None-Match`), and a change set of many (with `ifVersion` and `ifMatch`).
extension StoreAPI {
    func put(_ name: String, _ id: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        switch Reply.parseJSONBody(request) {
        case .success(let value): commitModel(name, id, request, .put(model: id, value: value), reply)
        case .failure(let failure): reply(failure.reply)
        }
    }

    func patch(_ name: String, _ id: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        switch Reply.parseJSONBody(request) {
        case .success(let value): commitModel(name, id, request, .patch(model: id, patch: value), reply)
        case .failure(let failure): reply(failure.reply)
        }
    }

    func commitModel(
        _ name: String, _ id: String, _ request: HTTPRequest, _ operation: StoreOperation,
        _ reply: @escaping @Sendable (Reply) -> Void
    ) {
        guard let store = stores.store(name) else { return reply(.error(.noSuchStore(name))) }
        let condition: CommitCondition
        switch EntityTags.condition(of: request, model: id) {
        case .success(let parsed): condition = parsed
        case .failure(let failure): return reply(failure.reply)
        }
        store.commit([operation], if: condition) { result in
            switch result {
            case .success(let changeSet):
                let created = changeSet.changes.first?.kind == .created && changeSet.changes.first?.keyPath == .whole
                let answer = Reply.json(created ? .created : .ok, [
                    "store": .string(name), "id": .string(id), "version": .number(JSONNumber(changeSet.version)),
                ])
                // A write that changed nothing made no version: the model keeps its tag.
                let tag = changeSet.changes.isEmpty ? store.model(id)?.tag ?? changeSet.version : changeSet.version
                reply(operation.kind == .delete ? answer : answer.withHeaders([("ETag", EntityTags.tag(tag))]))
            case .failure(let error):
                reply(.error(error))
            }
        }
    }

    func commitChanges(_ name: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        guard let store = stores.store(name) else { return reply(.error(.noSuchStore(name))) }
        let body: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): body = value
        case .failure(let failure): return reply(failure.reply)
        }
        if let refusal = ChangeRequest.refusal(body: body, headers: request.headers) { return reply(refusal.reply) }
        let operations: [StoreOperation], condition: CommitCondition
        switch (ChangeRequest.operations(from: body), EntityTags.condition(of: body)) {
        case (.success(let parsed), .success(let conditions)): (operations, condition) = (parsed, conditions)
        case (.failure(let failure), _), (_, .failure(let failure)): return reply(failure.reply)
        }
        store.commit(operations, if: condition) { result in
            switch result {
            case .success(let changeSet):
                reply(.json(.ok, [
                    "store": .string(name), "version": .number(JSONNumber(changeSet.version)),
                    "changes": .number(JSONNumber(changeSet.changes.count)),
                ]))
            case .failure(let error):
                reply(.error(error))
            }
        }
    }
}
