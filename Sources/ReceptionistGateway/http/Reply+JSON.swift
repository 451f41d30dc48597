import ReceptionistJSON
import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

extension Reply {
    /// A JSON reply from a value.
    static func json(_ status: HTTPStatus, _ value: JSONValue) -> Reply {
        Reply(HTTPResponse(status: status, headers: jsonHeaders, body: JSONWriter.encode(value)))
    }

    /// `Content-Type: application/json`, made once and shared (a reply that adds a header copies
    /// it then): every publish's answer had made its own array for it.
    private static let jsonHeaders = HTTPHeaders([("Content-Type", "application/json")])

    /// `201 {"topic":…,"seq":…}`, a publish's answer, written straight into its bytes: every HTTP
    /// publish gets one, and a `JSONValue` object would be built only to be encoded.
    static func published(topic: String, seq: UInt64) -> Reply {
        var body: [UInt8] = []
        body.reserveCapacity(32 + topic.utf8.count)
        JSONWriter.writeLiteral(#"{"topic":"#, to: &body)
        JSONWriter.writeString(topic, to: &body)
        JSONWriter.writeLiteral(#","seq":"#, to: &body)
        JSONWriter.writeDecimal(seq, to: &body)
        body.append(UInt8(ascii: "}"))
        return jsonBytes(.created, body)
    }

    /// A JSON reply from bytes the caller encoded (frames put together as they are sent).
    static func jsonBytes(_ status: HTTPStatus, _ body: [UInt8]) -> Reply {
        Reply(HTTPResponse(status: status, headers: jsonHeaders, body: body))
    }

    /// A JSON answer whose bytes other answers share (sent without a copy).
    static func json(_ status: HTTPStatus, shared body: SharedBytes) -> Reply {
        Reply(HTTPResponse(status: status, headers: jsonHeaders), sharedBody: body)
    }

    static func error(_ status: HTTPStatus, _ detail: String, allow: String? = nil) -> Reply {
        error(status, detail, headers: allow.map { [("Allow", $0)] } ?? [])
    }

    static func error(_ status: HTTPStatus, _ detail: String, headers: [(String, String)]) -> Reply {
        Reply(.error(status, detail)).withHeaders(headers)
    }

    static func noContent(headers: [(String, String)]) -> Reply {
        Reply(HTTPResponse(status: .noContent)).withHeaders(headers)
    }

    /// The same reply with `headers` added.
    func withHeaders(_ headers: [(String, String)]) -> Reply {
        var copy = self
        for (name, value) in headers { copy.response.headers.add(name, value) }
        return copy
    }

    static func methodNotAllowed(_ method: HTTPMethod, allow: String) -> Reply {
        error(.methodNotAllowed, "\(method.name) is not allowed here", allow: allow)
    }

    /// The status a store error answers with.
    static func error(_ storeError: StoreError) -> Reply {
        let status: HTTPStatus
        switch storeError {
        case .noSuchStore, .noSuchModel: status = .notFound
        case .storeExists: status = .conflict
        case .invalidStoreName, .invalidModelID, .notAnObject, .invalidValue, .emptyCommit: status = .badRequest
        case .reentrantCommit: status = .internalServerError
        case .unavailable, .outcomeUnknown: status = .serviceUnavailable
        case .invalidRead: status = .badRequest
        case .storageFailed: status = .insufficientStorage
        case .overCapacity: status = .overCapacity
        case .preconditionFailed(let detail, let version):
            return json(.preconditionFailed, [
                "error": "precondition_failed", "detail": .string(detail), "version": .number(JSONNumber(version)),
            ])
        case .gone(let detail, let oldest):
            return json(.gone, ["error": "gone", "detail": .string(detail), "oldest": .number(JSONNumber(oldest))])
        }
        var reply = error(status, storeError.description)
        if case .outcomeUnknown = storeError { reply.outcomeKnown = false }
        return reply
    }

    /// Validates a request body as one JSON text and returns it compacted (whitespace outside
    /// strings dropped, every other byte as sent), or explains why it is not JSON.
    static func compactJSONBody(_ request: HTTPRequest) -> Result<[UInt8], ReplyError> {
        guard !request.body.isEmpty else { return .failure(ReplyError(.error(.badRequest, "a JSON body is required"))) }
        do {
            return .success(try JSONParser.compact(request.body))
        } catch {
            return .failure(ReplyError(.error(.badRequest, "invalid JSON: \(error)")))
        }
    }

    /// Parses a request body as JSON, or explains why it is not.
    static func parseJSONBody(_ request: HTTPRequest) -> Result<JSONValue, ReplyError> {
        guard !request.body.isEmpty else { return .failure(ReplyError(.error(.badRequest, "a JSON body is required"))) }
        do {
            return .success(try JSONParser.parse(request.body))
        } catch {
            return .failure(ReplyError(.error(.badRequest, "invalid JSON: \(error)")))
        }
    }

    /// Refuses a member of `object` other than `known`, naming what the request takes: a misspelt
    /// member (`Rate`, `ifversion`) is refused, never ignored, since ignored it would do something
    /// other than what its sender meant. `what` names the object ("a job", "message 3").
    static func unknownMember(of object: JSONValue, known: Set<String>, in what: String) -> ReplyError? {
        guard case .object(let members) = object, let unknown = members.keys.sorted().first(where: { !known.contains($0) }) else {
            return nil
        }
        let listed = known.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
        return ReplyError(.error(.badRequest, "unknown member '\(unknown)' of \(what); it takes \(listed)"))
    }
}

/// A reply that ends a handler early.
struct ReplyError: Error {
    let reply: Reply
    init(_ reply: Reply) { self.reply = reply }

    /// The `detail` of the error's JSON body: why, in words, for a client that is not told by HTTP.
    var detail: String {
        (try? JSONParser.parse(reply.response.body))?["detail"]?.stringValue ?? "\(reply.response.status.code)"
    }
}
