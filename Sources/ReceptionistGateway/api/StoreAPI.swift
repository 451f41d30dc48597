import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `/api/stores/...`: reads, reads of the past and atomic (optionally conditional) commits. Every
/// store read or write runs on a job thread; a commit's reply comes once the engine has it (in
/// memory at once, on disk once stored, in a cluster once Redis appended it) and carries the new
/// version. No thread waits for the disk or Redis: the reply does.
struct StoreAPI {
    let stores: StoreRegistry
    let idempotency: Idempotency
    /// Tells the hub on the loop that a store was deleted (its subscribers are told): its name,
    /// and the store object deleted, when this node had it.
    let deleted: @Sendable (String, ModelStore?) -> Void
    /// The cluster's log in Redis, which reads of the past fall back on when a replica's history
    /// does not reach back; nil on one node.
    let log: LoopBound<any StoreSource>?
    /// Large snapshots read whole, shared by their readers.
    let snapshots = SnapshotCache()

    /// Change sets one `changes` read answers at most.
    static let maxChangesPerRead = 1000

    /// `segments` follow `/api/stores`; `scope` is the idempotency scope of the caller's API key.
    /// `limit`, for a client's read that the subscribe hook narrowed, is the most it may see: the
    /// models and key paths it allows (`docs/HOOKS.md`).
    func route(_ request: HTTPRequest, _ segments: ArraySlice<String>, scope: String, limit: SubscriptionOptions? = nil) -> RouteResult {
        let method = request.method
        let path = Array(segments)
        switch path.count {
        case 0:
            switch method {
            // On a job thread: tens of thousands of stores take the loop tens of milliseconds.
            case .get, .head: return .work { list() }
            case .post: return untilAnswered { create(request, $0) }
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, POST"))
            }
        case 1:
            switch method {
            case .get, .head:
                guard let text = StreamRequest.query(request, "at") else { return .work { snapshot(path[0], request, limit: limit) } }
                return past(path[0], after: UInt64(text)) { older in snapshot(path[0], request, older: older, limit: limit) }
            case .delete: return untilAnswered { delete(path[0], $0) }
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, DELETE"))
            }
        case 2 where path[1] == "changes":
            switch method {
            case .get, .head:
                let after = StreamRequest.query(request, "after").flatMap { UInt64($0) }
                return past(path[0], after: after) { older in changes(path[0], request, older: older, limit: limit) }
            case .post: break
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, POST"))
            }
            switch Idempotency.key(of: request) {
            case .success(let key):
                return .job { handoff, done in
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
            case .get, .head: return .work { model(name, id, limit: limit) }
            case .put: return later { put(name, id, request, $0) }
            case .patch: return later { patch(name, id, request, $0) }
            case .delete: return later { commitModel(name, id, request, .delete(model: id), $0) }
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, PUT, PATCH, DELETE"))
            }
        default:
            return .reply(.error(.notFound, "no such resource"))
        }
    }

    /// A commit's route: `work` runs on a job thread and replies once, when the commit is answered.
    func later(_ work: @escaping @Sendable (_ reply: @escaping @Sendable (Reply) -> Void) -> Void) -> RouteResult {
        .job { handoff, done in handoff.run(work, answer: done) }
    }

    /// A store's creation or deletion: `work` runs on a job thread and replies once, when the
    /// engine has answered (in a cluster, Redis: no thread waits for it); the connection's next
    /// request waits for the reply.
    func untilAnswered(_ work: @escaping @Sendable (_ reply: @escaping @Sendable (Reply) -> Void) -> Void) -> RouteResult {
        .job { handoff, done in handoff.runUntilAnswered(work, answer: done) }
    }

    private func list() -> Reply {
        let entries: [JSONValue] = stores.all.map { store in
            let (models, version) = store.modelCount
            return ["name": .string(store.name), "version": .number(JSONNumber(version)), "models": .number(JSONNumber(models))]
        }
        return .json(.ok, ["stores": .array(entries)])
    }

    private func create(_ request: HTTPRequest, _ reply: @escaping @Sendable (Reply) -> Void) {
        let body: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): body = value
        case .failure(let failure): return reply(failure.reply)
        }
        if let refusal = Reply.unknownMember(of: body, known: ["name"], in: "a new store") { return reply(refusal.reply) }
        guard let name = body["name"]?.stringValue else { return reply(.error(.badRequest, "expected {\"name\": \"...\"}")) }
        stores.create(name) { result in
            switch result {
            case .success(let store): reply(.json(.created, ["name": .string(store.name), "version": 0]))
            case .failure(let error): reply(.error(error))
            }
        }
    }

    private func delete(_ name: String, _ reply: @escaping @Sendable (Reply) -> Void) {
        let store = stores.store(name)
        let deleted = self.deleted
        snapshots.forget(store: name)
        stores.delete(name) { [stores] error in
            if let error {
                // A deletion whose outcome is unknown that already took the store away here
                // (the disk's queue holds it) tells its subscribers as a deletion does.
                if case .outcomeUnknown = error, let store, stores.store(name) !== store { deleted(name, store) }
                return reply(.error(error))
            }
            deleted(name, store)
            reply(.json(.ok, ["store": .string(name), "deleted": true]))
        }
    }

    /// A read of the past, on a job thread. In a cluster, when the replica's history does not
    /// reach back to `after`, the change sets below it are read from the log in Redis first (on
    /// the loop, bounded by `--redis-history` and `--redis-timeout`) and handed to `read`.
    private func past(_ name: String, after: UInt64?, _ read: @escaping @Sendable ([ChangeSet]) -> Reply) -> RouteResult {
        guard let log, let after, let floor = stores.store(name)?.historyFloor, after < floor else {
            return .work { read([]) }
        }
        return .job { handoff, done in
            log.value.storeHistory(of: name, after: after, through: floor) { older in
                handoff.run({ reply in reply(read(older ?? [])) }, answer: done)
            }
        }
    }

    /// The store now, or with `?at=N` as it was at version N.
    private func snapshot(_ name: String, _ request: HTTPRequest, older: [ChangeSet] = [], limit: SubscriptionOptions? = nil) -> Reply {
        guard let store = stores.store(name) else { return .error(.noSuchStore(name)) }
        let snapshot: StoreSnapshot
        if let text = StreamRequest.query(request, "at") {
            guard let version = UInt64(text) else { return .error(.badRequest, "at must be a version number") }
            switch store.snapshot(at: version, older: older) {
            case .success(let past): snapshot = past
            case .failure(let error): return .error(error)
            }
        } else {
            snapshot = store.snapshot()
        }
        let models = limit.map { Self.filter($0).project(snapshot.models) } ?? snapshot.models
        // Read with the models (a replica reset may change both between two reads).
        let epoch = snapshot.epoch ?? store.epoch
        func body() -> JSONValue {
            [
                "store": .string(name), "version": .number(JSONNumber(snapshot.version)), "epoch": .string(epoch),
                "models": .sortedObject(models),
            ]
        }
        // The store as it is now, whole: the same bytes for every reader of this version.
        guard limit == nil, StreamRequest.query(request, "at") == nil else { return .json(.ok, body()) }
        return .json(.ok, shared: snapshots.body(store: name, epoch: epoch, version: snapshot.version, resets: snapshot.resets) {
            JSONWriter.encode(body())
        })
    }

    /// `?after=A&limit=K[&until=B][&models=…][&paths=…]`: the change sets after A, as `changes` frames.
    private func changes(_ name: String, _ request: HTTPRequest, older: [ChangeSet], limit allowed: SubscriptionOptions? = nil) -> Reply {
        guard let store = stores.store(name) else { return .error(.noSuchStore(name)) }
        func number(_ field: String) -> Result<UInt64?, ReplyError> {
            guard let text = StreamRequest.query(request, field) else { return .success(nil) }
            guard let value = UInt64(text) else { return .failure(ReplyError(.error(.badRequest, "\(field) must be a number"))) }
            return .success(value)
        }
        let after: UInt64, until: UInt64?, limit: UInt64
        switch (number("after"), number("until"), number("limit")) {
        case (.success(let a), .success(let u), .success(let l)):
            guard let a else { return .error(.badRequest, "after is required: the version to read after") }
            (after, until, limit) = (a, u, min(l ?? 100, UInt64(Self.maxChangesPerRead)))
        case (.failure(let failure), _, _), (_, .failure(let failure), _), (_, _, .failure(let failure)):
            return failure.reply
        }
        var options: SubscriptionOptions
        switch StreamRequest.subscriptionOptions(request) {
        case .success(let decoded): options = decoded
        case .failure(let problem): return .error(.badRequest, problem.message)
        }
        if let allowed {
            guard let narrowed = options.narrowed(to: allowed) else {
                return .error(.forbidden, "the subscribe hook allows none of the models or paths asked for")
            }
            options = narrowed
        }
        let filter = Self.filter(options)
        let epoch = store.epoch
        let read: [ChangeSet]
        switch store.changes(after: after, until: until, limit: Int(limit), older: older) {
        case .success(let changeSets): read = changeSets
        case .failure(let error): return .error(error)
        }
        var body = Array("{\"store\":".utf8) + JSONWriter.encode(.string(name))
        body += ",\"epoch\":".utf8 + JSONWriter.encode(.string(epoch)) + ",\"changes\":[".utf8
        var first = true
        for var changeSet in read {
            if !filter.isAll {
                changeSet.changes = filter.apply(changeSet.changes)
                if changeSet.changes.isEmpty { continue }
            }
            if !first { body.append(UInt8(ascii: ",")) }
            first = false
            body += PushEncoder.changes(changeSet, old: options.old)
        }
        // How far the read went, filtered or not: the next page is read after it. A page the
        // filter left empty is not the end; `through` not moving is.
        body += "],\"through\":".utf8 + JSONWriter.encode(.number(JSONNumber(read.last?.version ?? after))) + "}".utf8
        return .jsonBytes(.ok, body)
    }

    private func model(_ name: String, _ id: String, limit: SubscriptionOptions? = nil) -> Reply {
        guard let store = stores.store(name) else { return .error(.noSuchStore(name)) }
        let filter = limit.map(Self.filter)
        // Refused before it is looked up: a model the reader may not see is refused alike whether
        // it exists or not, so its existence is hidden too.
        if let filter, !filter.follows(model: id) { return .error(.forbidden, "the subscribe hook does not allow model '\(id)'") }
        guard let (value, version, tag) = store.model(id) else { return .error(.noSuchModel(id)) }
        let shown = filter.map { $0.project(model: value) } ?? value
        return Reply.json(.ok, ["store": .string(name), "id": .string(id), "version": .number(JSONNumber(version)), "value": shown])
            .withHeaders([("ETag", EntityTags.tag(tag))])
    }

    /// The filter of a subscription's models and paths.
    static func filter(_ options: SubscriptionOptions) -> ChangeFilter {
        ChangeFilter(models: options.models, paths: options.paths.map { $0.map(ModelKeyPath.init) })
    }
}
