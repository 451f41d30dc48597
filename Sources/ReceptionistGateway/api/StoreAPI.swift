import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// `/api/stores/...`: reads and atomic commits. Every store read or write runs on a job thread;
/// its reply comes after the commit and carries the new version. A commit to a cluster store is
/// computed on the job thread and handed to Redis; the reply waits for Redis, no thread does.
struct StoreAPI {
    let stores: StoreRegistry
    let idempotency: Idempotency
    let handoff: JobHandoff

    /// `segments` follow `/api/stores`; `scope` is the idempotency scope of the caller's API key.
    func route(_ request: HTTPRequest, _ segments: ArraySlice<String>, scope: String) -> RouteResult {
        let method = request.method
        let path = Array(segments)
        switch path.count {
        case 0:
            switch method {
            case .get, .head: return .reply(list())
            case .post: return .work { create(request) }
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, POST"))
            }
        case 1:
            guard method == .get || method == .head else { return .reply(.methodNotAllowed(method, allow: "GET, HEAD")) }
            return .work { snapshot(path[0]) }
        case 2 where path[1] == "changes":
            guard method == .post else { return .reply(.methodNotAllowed(method, allow: "POST")) }
            switch Idempotency.key(of: request) {
            case .success(let key):
                return .later { done in
                    idempotency.run(key, scope: scope, request: request, later: { answer in
                        handoff.run({ reply in commitChanges(path[0], request, reply) }, answer: answer)
                    }, done: done)
                }
            case .failure(let failure):
                return .reply(failure.reply)
            }
        case 3 where path[1] == "models":
            let (name, id) = (path[0], path[2])
            switch method {
            case .get, .head: return .work { model(name, id) }
            case .put: return later { put(name, id, request, $0) }
            case .patch: return later { patch(name, id, request, $0) }
            case .delete: return later { commit(name, id, [.delete(model: id)], $0) }
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, PUT, PATCH, DELETE"))
            }
        default:
            return .reply(.error(.notFound, "no such resource"))
        }
    }

    /// A commit's route: `work` runs on a job thread and replies once, when the commit is answered.
    private func later(_ work: @escaping @Sendable (_ reply: @escaping @Sendable (Reply) -> Void) -> Void) -> RouteResult {
        .later { done in handoff.run(work, answer: done) }
    }

    private func list() -> Reply {
        let entries: [JSONValue] = stores.all.map { store in
            let (models, version) = store.modelCount
            return ["name": .string(store.name), "version": .number(JSONNumber(version)), "models": .number(JSONNumber(models))]
        }
        return .json(.ok, ["stores": .array(entries)])
    }

    private func create(_ request: HTTPRequest) -> Reply {
        let body: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): body = value
        case .failure(let failure): return failure.reply
        }
        guard let name = body["name"]?.stringValue else { return .error(.badRequest, "expected {\"name\": \"...\"}") }
        do {
            let store = try stores.create(name)
            return .json(.created, ["name": .string(store.name), "version": 0])
        } catch {
            return .error(error)
        }
    }

    private func snapshot(_ name: String) -> Reply {
        guard let store = stores.store(name) else { return .error(.noSuchStore(name)) }
        let snapshot = store.snapshot()
        return .json(.ok, [
            "store": .string(name), "version": .number(JSONNumber(snapshot.version)), "epoch": .string(store.epoch),
            "models": .sortedObject(snapshot.models),
        ])
    }

    private func model(_ name: String, _ id: String) -> Reply {
        guard let store = stores.store(name) else { return .error(.noSuchStore(name)) }
        guard let (value, version) = store.model(id) else { return .error(.noSuchModel(id)) }
        return .json(.ok, ["store": .string(name), "id": .string(id), "version": .number(JSONNumber(version)), "value": value])
    }

    private func put(_ name: String, _ id: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        switch Reply.parseJSONBody(request) {
        case .success(let value): commit(name, id, [.put(model: id, value: value)], reply)
        case .failure(let failure): reply(failure.reply)
        }
    }

    private func patch(_ name: String, _ id: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        switch Reply.parseJSONBody(request) {
        case .success(let value): commit(name, id, [.patch(model: id, patch: value)], reply)
        case .failure(let failure): reply(failure.reply)
        }
    }

    private func commit(
        _ name: String, _ id: String, _ operations: [StoreOperation], _ reply: @escaping @Sendable (Reply) -> Void
    ) {
        guard let store = stores.store(name) else { return reply(.error(.noSuchStore(name))) }
        store.commit(operations) { result in
            switch result {
            case .success(let changeSet):
                let created = changeSet.changes.first?.kind == .created && changeSet.changes.first?.keyPath == .whole
                reply(.json(created ? .created : .ok, [
                    "store": .string(name), "id": .string(id), "version": .number(JSONNumber(changeSet.version)),
                ]))
            case .failure(let error):
                reply(.error(error))
            }
        }
    }

    private func commitChanges(_ name: String, _ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        guard let store = stores.store(name) else { return reply(.error(.noSuchStore(name))) }
        let body: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): body = value
        case .failure(let failure): return reply(failure.reply)
        }
        let operations: [StoreOperation]
        switch ChangeRequest.operations(from: body) {
        case .success(let parsed): operations = parsed
        case .failure(let failure): return reply(failure.reply)
        }
        store.commit(operations) { result in
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
