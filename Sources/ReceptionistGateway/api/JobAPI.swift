import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// `/api/jobs/...`: start, list, retune and stop jobs.
struct JobAPI {
    let stores: StoreRegistry
    let jobs: JobRunner
    static let maxRate = 10_000_000.0

    /// `segments` follow `/api/jobs`.
    func route(_ request: HTTPRequest, _ segments: ArraySlice<String>) -> RouteResult {
        let method = request.method
        let path = Array(segments)
        switch path.count {
        case 0:
            switch method {
            case .get, .head: return .reply(.json(.ok, ["jobs": .array(jobs.allJobs.map { Self.json($0.info) })]))
            case .post: return .reply(start(request))
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, POST"))
            }
        case 1:
            // A method the path does not take is 405 whether or not the job exists.
            guard [.get, .head, .patch, .delete].contains(method) else {
                return .reply(.methodNotAllowed(method, allow: "GET, HEAD, PATCH, DELETE"))
            }
            guard let job = jobs.job(path[0]) else { return .reply(.error(.notFound, "no job '\(path[0])'")) }
            switch method {
            case .get, .head: return .reply(.json(.ok, Self.json(job.info)))
            case .patch: return .reply(retune(job, request))
            case .delete:
                job.stop()
                return .reply(.json(.ok, Self.json(job.info)))
            default: return .reply(.methodNotAllowed(method, allow: "GET, HEAD, PATCH, DELETE"))
            }
        default:
            return .reply(.error(.notFound, "no such resource"))
        }
    }

    private func start(_ request: HTTPRequest) -> Reply {
        let body: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): body = value
        case .failure(let failure): return failure.reply
        }
        if let refusal = Reply.unknownMember(of: body, known: ["kind", "store", "rate"], in: "a job") { return refusal.reply }
        guard body["kind"]?.stringValue == "animate" else { return .error(.badRequest, "\"kind\" must be \"animate\"") }
        guard let name = body["store"]?.stringValue else { return .error(.badRequest, "missing \"store\"") }
        guard let rate = Self.rate(body["rate"] ?? 30) else { return badRate() }
        guard let store = stores.store(name) else { return .error(.noSuchStore(name)) }
        guard let job = jobs.startAnimate(store: store, rate: rate) else {
            return .error(.overCapacity, "\(JobRunner.maxRunningJobs) jobs are running, the most at once; stop one first")
        }
        return .json(.created, Self.json(job.info))
    }

    private func retune(_ job: AnimateJob, _ request: HTTPRequest) -> Reply {
        switch Reply.parseJSONBody(request) {
        case .success(let body):
            if let refusal = Reply.unknownMember(of: body, known: ["rate"], in: "a job's change") { return refusal.reply }
            guard let value = body["rate"], let rate = Self.rate(value) else { return badRate() }
            // An ended job is not changed: its rate would say what it never did.
            guard job.isRunning else { return .error(.conflict, "job '\(job.info.id)' has ended (\(job.info.state.name)); start a new one") }
            job.setRate(rate)
            return .json(.ok, Self.json(job.info))
        case .failure(let failure):
            return failure.reply
        }
    }

    private func badRate() -> Reply {
        .error(.badRequest, "\"rate\" must be a number of changes per second above 0 and at most \(Int(Self.maxRate))")
    }

    private static func rate(_ value: JSONValue) -> Double? {
        guard let rate = value.numberValue, rate > 0, rate <= maxRate else { return nil }
        return rate
    }

    static func json(_ info: JobInfo) -> JSONValue {
        var object: JSONObject = [
            "id": .string(info.id), "kind": .string(info.kind), "store": .string(info.store),
            "rate": .number(JSONNumber(info.rate)), "state": .string(info.state.name), "changes": .number(JSONNumber(info.changes)),
        ]
        if case .failed(let reason) = info.state { object["error"] = .string(reason) }
        return .object(object)
    }
}
