import Logging
import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel

/// What a hook call came to: the backend's answer, or why there is none (it is down, slow,
/// answered 5xx or something that is not JSON, or too many calls are waiting already).
enum HookAnswer: Equatable {
    case answered(status: Int, body: JSONValue?)
    case unavailable(String)
}

/// Calls the backend's hooks: a JSON `POST` each, made by `HTTPClient` on the loop, at most
/// `maxInFlight` at once and `maxQueued` waiting (`HookQueue`), each bounded by the hook
/// time-out counted from when it was asked for, waiting included. Nothing here blocks the loop,
/// and a backend that is down or slow costs each caller at most the time-out.
///
/// Loop thread only.
final class HookClient {
    private struct Pending {
        let kind: HookKind
        let body: [UInt8]
        /// Loop milliseconds past which the call is not worth making any more.
        let deadline: UInt64
        let asked: UInt64
        let completion: (HookAnswer) -> Void
    }

    let settings: HookSettings
    private let loop: EventLoop
    private let http: HTTPClient
    private let logger: Logger
    private var queue: HookQueue<Pending>
    private var closed = false
    /// When each hook's failed calls, and answered ones after them, are logged (`answer`).
    private var failures: [HookKind: FailureLog] = [:]
    private(set) var stats = HookStats()
    /// Told each answered call's latency in seconds (the `/metrics` histogram).
    var observeLatency: ((HookKind, Double) -> Void)?

    init(settings: HookSettings, loop: EventLoop, logger: Logger) {
        self.settings = settings
        self.loop = loop
        self.logger = logger
        http = HTTPClient(loop: loop)
        queue = HookQueue(maxInFlight: settings.maxInFlight, maxQueued: settings.maxQueued)
    }

    func isSet(_ kind: HookKind) -> Bool { settings.url(kind) != nil }

    var inFlight: Int { queue.inFlight }
    var queued: Int { queue.queued }
    var peakInFlight: Int { queue.peakInFlight }

    /// Calls `kind` with `body`; `completion` runs on the loop, once. A hook that is not set is
    /// answered `unavailable` (callers ask `isSet` first).
    func call(_ kind: HookKind, _ body: JSONValue, completion: @escaping (HookAnswer) -> Void) {
        call(kind, encoded: JSONWriter.encode(body), completion: completion)
    }

    /// `call` with `body` (an object, `members`) and one more member, `data`, as the JSON text a
    /// client sent (compact, validated): the backend judges the very bytes that are published,
    /// not a copy parsed and written again (which keeps one of two members of one name, and
    /// decodes escapes).
    func call(_ kind: HookKind, _ members: JSONObject, data: [UInt8], completion: @escaping (HookAnswer) -> Void) {
        var body = JSONWriter.encode(.object(members))
        body.removeLast()  // the object's closing brace
        if !members.isEmpty { body.append(UInt8(ascii: ",")) }
        body += Array("\"data\":".utf8)
        body += data
        body.append(UInt8(ascii: "}"))
        call(kind, encoded: body, completion: completion)
    }

    private func call(_ kind: HookKind, encoded body: [UInt8], completion: @escaping (HookAnswer) -> Void) {
        guard settings.url(kind) != nil else { return completion(.unavailable("no \(kind.rawValue) hook is set")) }
        let now = loop.nowMilliseconds
        let pending = Pending(
            kind: kind, body: body, deadline: now + UInt64(settings.timeoutSeconds * 1000), asked: now,
            completion: completion)
        stats.calls[kind, default: 0] += 1
        switch queue.submit(pending, admits: kind == .connect || kind == .subscribe || kind == .refresh) {
        case .start(let call): start(call)
        case .queued: break
        case .refused(let call):
            stats.failures[kind, default: 0] += 1
            call.completion(.unavailable("too many \(kind.rawValue) hook calls are waiting"))
        }
    }

    /// Ends every call (each told `unavailable`); the gateway is stopping.
    func close() {
        closed = true
        http.close()
        while let next = queue.finished() { next.completion(.unavailable("the gateway is stopping")) }
    }

    /// Makes `call`, and the calls queued after it that its slot passes to, until one is made: a
    /// call whose time ran out while it waited is answered here. A loop, so that a long queue that
    /// ran out at once (a backend that hung the one call in flight) is answered at one depth.
    private func start(_ call: Pending) {
        var next: Pending? = call
        while let call = next {
            if launch(call) { return }
            answer(call, .unavailable("the \(call.kind.rawValue) hook did not answer in time"))
            next = closed ? nil : queue.finished()
        }
    }

    /// Sends `call`; false, sending nothing, if its time ran out while it waited.
    private func launch(_ call: Pending) -> Bool {
        let now = loop.nowMilliseconds
        guard now < call.deadline, let url = settings.url(call.kind) else { return false }
        let request = OutboundRequest(
            url: url, headers: ["Content-Type: application/json", "X-Receptionist-Hook: \(call.kind.rawValue)"], body: call.body,
            timeoutMilliseconds: call.deadline - now)
        http.post(request) { [weak self] response in
            self?.ended(call, Self.answer(call.kind, response))
        }
        return true
    }

    private func ended(_ call: Pending, _ answer: HookAnswer) {
        self.answer(call, answer)
        guard !closed, let next = queue.finished() else { return }
        start(next)
    }

    private func answer(_ call: Pending, _ answer: HookAnswer) {
        if case .unavailable(let why) = answer {
            stats.failures[call.kind, default: 0] += 1
            if !closed, let count = failures[call.kind, default: FailureLog()].failed(now: Double(loop.nowMilliseconds) / 1000) {
                logger.warning(
                    "hook calls fail: their clients are answered unavailable",
                    metadata: ["hook": "\(call.kind.rawValue)", "why": "\(why)", "failures": "\(count)"])
            } else {
                logger.debug("hook call failed", metadata: ["hook": "\(call.kind.rawValue)", "why": "\(why)"])
            }
        } else {
            observeLatency?(call.kind, Double(loop.nowMilliseconds - call.asked) / 1000)
            if failures[call.kind]?.succeeded() == true {
                logger.notice("hook calls are answered again", metadata: ["hook": "\(call.kind.rawValue)"])
            }
        }
        call.completion(answer)
    }

    /// A response as the hook's answer: 5xx, a failure, or a 200 that is not JSON is `unavailable`.
    static func answer(_ kind: HookKind, _ response: OutboundResponse) -> HookAnswer {
        switch response {
        case .failed(.timedOut): return .unavailable("the \(kind.rawValue) hook did not answer in time")
        case .failed(.tooLarge): return .unavailable("the \(kind.rawValue) hook's answer is too large")
        case .failed(.cancelled): return .unavailable("the gateway is stopping")
        case .failed(.transport(let why)): return .unavailable("the \(kind.rawValue) hook cannot be reached: \(why)")
        case .answered(let status, _) where status >= 500 || status < 200:
            return .unavailable("the \(kind.rawValue) hook answered \(status)")
        case .answered(let status, let body):
            if body.isEmpty { return .answered(status: status, body: nil) }
            guard let value = try? JSONParser.parse(body) else {
                return status == 200 ? .unavailable("the \(kind.rawValue) hook answered something that is not JSON")
                    : .answered(status: status, body: nil)
            }
            return .answered(status: status, body: value)
        }
    }
}

/// Hook calls made and failed, by hook, for `/metrics`.
struct HookStats {
    var calls: [HookKind: Int] = [:]
    var failures: [HookKind: Int] = [:]
}
