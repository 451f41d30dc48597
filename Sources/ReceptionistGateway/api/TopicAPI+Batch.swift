import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `POST /api/publish`: many messages in one request, for backends that publish in bulk. Every
/// message is checked before any is published; then each is published as one message, in order,
/// and the answer lists every sequence number. Each message's `data` is the publisher's bytes,
/// found in the body's own text, never parsed and written again.
extension TopicAPI {
    /// The most messages one request may carry.
    static let maxBatch = 1000

    /// `charge(n)` takes `n` more publishes from the caller's bucket (the request took one), or
    /// says why it may not.
    func publishBatch(_ request: HTTPRequest, scope: String, charge: (Int) -> ReplyError?) -> RouteResult {
        guard request.method == .post else { return .reply(.methodNotAllowed(request.method, allow: "POST")) }
        let key: IdempotencyKey?
        switch Idempotency.key(of: request) {
        case .success(let parsed): key = parsed
        case .failure(let failure): return .reply(failure.reply)
        }
        let messages: [(topic: String, data: [UInt8])]
        switch Self.batch(request.body) {
        case .success(let parsed): messages = parsed
        case .failure(let failure): return .reply(failure.reply)
        }
        for (index, message) in messages.enumerated() {
            if let problem = hub.check(.topic(message.topic)) {
                return .reply(.error(.badRequest, "message \(index): \(problem.message)"))
            }
        }
        // The topics it would make count together against `--max-topics`, not one by one.
        if let refusal = hub.capacityRefusal(forTopics: messages.lazy.map(\.topic)) {
            return .reply(.error(.overCapacity("\(refusal); none was published")))
        }
        for message in messages {
            // Every message's engine must take it, or none is published: the batch stays retriable.
            switch log.refusal(for: message.topic) {
            case nil: continue
            case .overCapacity(let why)?: return .reply(.error(.overCapacity("\(why); none was published")))
            case let refusal?: return .reply(.error(.unavailable("\(refusal.description); none was published")))
            }
        }
        // Charged once nothing else refuses it: a batch refused spends no more than its call.
        if let refusal = charge(messages.count - 1) { return .reply(refusal.reply) }
        if log.answersAtOnce {
            // Every message is numbered now, so the answer is ready at once.
            return .reply(idempotency.run(key, scope: scope, request: request) { publishAtOnce(messages) })
        }
        let (log, idempotency) = (self.log, self.idempotency)
        // A batch with a key goes out once its claim is answered: what follows on the connection
        // waits for its answer, as for a single publish (`publish`).
        let start: (@escaping (Reply) -> Void) -> Void = { done in
            idempotency.run(key, scope: scope, request: request, later: { answer in
                // Every message goes to the engine now, in order (to Redis in one write); the
                // answer waits for the last.
                let outcomes = BatchOutcomes(count: messages.count) { outcomes in answer(Self.reply(messages, outcomes)) }
                for (index, message) in messages.enumerated() {
                    log.publish(message.topic, data: message.data) { outcomes.set(index, $0) }
                }
            }, done: done)
        }
        return key == nil ? .later(start) : .job { _, done in start(done) }
    }

    /// Publishes every message through a log that answers at once, and answers.
    private func publishAtOnce(_ messages: [(topic: String, data: [UInt8])]) -> Reply {
        let outcomes = BatchOutcomes(count: messages.count) { _ in }
        for (index, message) in messages.enumerated() {
            log.publish(message.topic, data: message.data) { outcomes.set(index, $0) }
        }
        return Self.reply(messages, outcomes.results)
    }

    /// The answer to a batch once every message has its outcome.
    private static func reply(_ messages: [(topic: String, data: [UInt8])], _ outcomes: [Result<UInt64, StoreError>]) -> Reply {
        var answers: [JSONValue] = []
        for (index, outcome) in outcomes.enumerated() {
            switch outcome {
            case .success(let seq):
                answers.append(["topic": .string(messages[index].topic), "seq": .number(JSONNumber(seq))])
            case .failure(let error):
                let refused = outcomes.allSatisfy {
                    if case .failure(.unavailable) = $0 { return true }
                    return false
                }
                // Nothing was published: the request may be retried, under its key too.
                if refused { return .error(.unavailable("message 0: \(error.description); none was published")) }
                // Some were published (or may have been): the outcome is unknown, so an
                // `Idempotency-Key` stays claimed and a retry cannot publish them twice.
                let before = index == 0 ? "message 0 may have been published" : "messages 0 to \(index - 1) were published"
                let after = outcomes[(index + 1)...].contains { if case .success = $0 { true } else { false } }
                    ? ", and some after it were too" : ""
                return .error(.outcomeUnknown("message \(index): \(error.description); \(before)\(after)"))
            }
        }
        return .json(.created, ["messages": .array(answers)])
    }

    /// The messages of a batch body, each `data` as the bytes it was written with (compacted), or
    /// what is wrong with it.
    static func batch(_ body: [UInt8]) -> Result<[(topic: String, data: [UInt8])], ReplyError> {
        func bad(_ detail: String) -> Result<[(topic: String, data: [UInt8])], ReplyError> {
            .failure(ReplyError(.error(.badRequest, detail)))
        }
        guard !body.isEmpty else { return bad("a JSON body is required") }
        let text: [UInt8]
        do {
            text = try JSONParser.compact(body)
        } catch {
            return bad("invalid JSON: \(error)")
        }
        guard let members = JSONSpans.members(of: text, in: 0..<text.count),
              let list = members.last(where: { $0.key == "messages" })?.value,
              !members.contains(where: { $0.key != "messages" }),
              let elements = JSONSpans.elements(of: text, in: list)
        else { return bad("the body must be {\"messages\":[{\"topic\":…,\"data\":…},…]}") }
        guard !elements.isEmpty, elements.count <= maxBatch else {
            return bad("\"messages\" must hold 1 to \(maxBatch) messages")
        }
        var messages: [(topic: String, data: [UInt8])] = []
        messages.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard let fields = JSONSpans.members(of: text, in: element) else {
                return bad("message \(index) must be an object with \"topic\" and \"data\"")
            }
            if let unknown = fields.first(where: { $0.key != "topic" && $0.key != "data" }) {
                return bad("unknown member '\(unknown.key)' of message \(index); it takes \"topic\" and \"data\"")
            }
            guard let topicSpan = fields.last(where: { $0.key == "topic" })?.value,
                  let topic = (try? JSONParser.parse(Array(text[topicSpan])))?.stringValue
            else { return bad("message \(index) needs a string \"topic\"") }
            guard let data = fields.last(where: { $0.key == "data" })?.value else {
                return bad("message \(index) needs \"data\"")
            }
            messages.append((topic, Array(text[data])))
        }
        return .success(messages)
    }
}

/// The outcomes of a batch's messages as Redis answers them, handed on when the last one is in.
///
/// Loop thread only.
private final class BatchOutcomes {
    private var outcomes: [Result<UInt64, StoreError>?]
    private var missing: Int
    private let complete: ([Result<UInt64, StoreError>]) -> Void

    init(count: Int, complete: @escaping ([Result<UInt64, StoreError>]) -> Void) {
        outcomes = Array(repeating: nil, count: count)
        missing = count
        self.complete = complete
    }

    func set(_ index: Int, _ outcome: Result<UInt64, StoreError>) {
        guard outcomes[index] == nil else { return }
        outcomes[index] = outcome
        missing -= 1
        if missing == 0 { complete(results) }
    }

    /// Every outcome so far, an unanswered one as refused.
    var results: [Result<UInt64, StoreError>] {
        outcomes.map { $0 ?? .failure(.unavailable("the engine did not answer")) }
    }
}
