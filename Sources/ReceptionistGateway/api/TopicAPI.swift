import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `/api/topics/...`: publish and list. Topics live on the loop, so these answer at once; a publish
/// is answered after the message is sequenced, in the history, and queued to every subscriber.
/// A message's data is forwarded as the publisher's bytes, validated and compacted, never re-encoded.
///
/// Loop thread only.
struct TopicAPI {
    let hub: PushHub
    /// Publishes through Redis when the gateway is one node of a cluster.
    let publisher: TopicPublisher
    let idempotency: Idempotency

    /// Where messages are numbered and kept: memory, disk or Redis.
    var log: any TopicLog { publisher.log }

    /// Messages one `messages` read answers at most.
    static let maxMessagesPerRead = 1000

    /// `segments` follow `/api/topics`; `scope` is the idempotency scope of the caller's API key.
    func route(_ request: HTTPRequest, _ segments: ArraySlice<String>, scope: String) -> RouteResult {
        let method = request.method
        // Counted from the slice's own start: indexing it, not copying it, on every publish.
        let first = segments.startIndex
        switch segments.count {
        case 0:
            guard method == .get || method == .head else { return .reply(.methodNotAllowed(method, allow: "GET, HEAD")) }
            // Read on the loop, sorted and encoded on a job thread (`--max-topics` of them take
            // the loop tens of milliseconds).
            let rows = hub.topics.values.map { (name: $0.name, seq: $0.seq, subscribers: $0.subscriberCount) }
            return .work {
                let topics: [JSONValue] = rows.sorted { $0.name < $1.name }.map {
                    ["name": .string($0.name), "seq": .number(JSONNumber($0.seq)), "subscribers": .number(JSONNumber($0.subscribers))]
                }
                return .json(.ok, ["topics": .array(topics)])
            }
        case 2 where segments[first + 1] == "messages":
            if method == .get || method == .head { return messages(segments[first], request) }
            guard method == .post else { return .reply(.methodNotAllowed(method, allow: "GET, HEAD, POST")) }
            return publish(segments[first], request, scope: scope)
        default:
            return .reply(.error(.notFound, "no such resource"))
        }
    }

    /// Asked before a client's publish goes to the log (the publish hook, `ClientPublishes`): it
    /// decides the data to publish (the client's, or a replacement), or the reply that refuses it.
    typealias Gate = (_ data: [UInt8], _ decided: @escaping (Result<[UInt8], ReplyError>) -> Void) -> Void

    /// Publishes `request`'s body through the engine's log, past `gate` if one decides. In memory
    /// the answer is ready at once (and the idempotency table, in memory too, may be asked on the
    /// loop); on disk, through Redis or past a gate the reply waits on the loop, and no thread
    /// does. An `Idempotency-Key` is claimed before the gate is asked: a retry of a publish made is
    /// answered from it, not asked about again.
    func publish(_ name: String, _ request: HTTPRequest, scope: String, gate: Gate? = nil) -> RouteResult {
        let key: IdempotencyKey?
        switch Idempotency.key(of: request) {
        case .success(let parsed): key = parsed
        case .failure(let failure): return .reply(failure.reply)
        }
        let json: [UInt8]
        switch Reply.compactJSONBody(request) {
        case .success(let bytes): json = bytes
        case .failure(let failure): return .reply(failure.reply)
        }
        // The name was checked with the path (`APIRequestCheck`), before anything was read.
        if let refusal = log.refusal(for: name) { return .reply(.error(refusal)) }
        let (log, idempotency) = (self.log, self.idempotency)
        func answer(_ outcome: Result<UInt64, StoreError>) -> Reply {
            switch outcome {
            case .success(let seq): .published(topic: name, seq: seq)
            case .failure(let error): .error(error)
            }
        }
        if log.answersAtOnce, gate == nil {
            return .reply(idempotency.run(key, scope: scope, request: request) {
                let outcome = PublishOutcome()
                log.publish(name, data: json) { outcome.value = $0 }
                return answer(outcome.value)
            })
        }
        let send: (@escaping (Reply) -> Void) -> Void = { reply in
            guard let gate else { return log.publish(name, data: json) { reply(answer($0)) } }
            gate(json) { decided in
                switch decided {
                case .success(let data): log.publish(name, data: data) { reply(answer($0)) }
                case .failure(let refusal): reply(refusal.reply)
                }
            }
        }
        // Without a key there is nothing to claim: the answer goes straight to the door, and the
        // request is not kept meanwhile.
        guard let key else { return .later(send) }
        // With one, the publish goes out once the claim is answered (by Redis, in a cluster): the
        // connection's later requests wait for the answer, so that a publish sent after it is not
        // numbered before it.
        return .job { _, done in idempotency.run(key, scope: scope, request: request, later: send, done: done) }
    }

    /// `?after=N&limit=K`: the messages after N still kept, as `message` frames: from the topic's
    /// history, and in a cluster from the log in Redis below it.
    private func messages(_ name: String, _ request: HTTPRequest) -> RouteResult {
        // The name was checked with the path (`APIRequestCheck`).
        guard let afterText = StreamRequest.query(request, "after"), let after = UInt64(afterText) else {
            return .reply(.error(.badRequest, "after is required: the number to read after"))
        }
        var limit = UInt64(100)
        if let text = StreamRequest.query(request, "limit") {
            guard let value = UInt64(text) else { return .reply(.error(.badRequest, "limit must be a number")) }
            limit = min(value, UInt64(Self.maxMessagesPerRead))
        }
        let notFound = Reply.error(.notFound, "no topic '\(name)': nothing was published to it and nobody subscribes to it")
        if let topic = hub.topics[name] { return page(topic, after: after, limit: limit) }
        // A cluster node that does not follow the topic reads it from Redis first; on one node, a
        // read never makes a topic (a publish or a subscription does).
        let log = self.log
        guard log.isShared else { return .reply(notFound) }
        return .later { done in
            log.readIn(name) { copy in
                guard let copy else {
                    return done(.error(.unavailable("topic '\(name)' could not be read from the cluster in time; retry")))
                }
                guard copy.seq > 0 else { return done(notFound) }
                switch self.page(copy, after: after, limit: limit) {
                case .reply(let reply): done(reply)
                case .later(let start): start(done)
                default: done(notFound)
                }
            }
        }
    }

    /// `?after=N&limit=K` of a topic this node holds.
    private func page(_ topic: Topic, after: UInt64, limit: UInt64) -> RouteResult {
        let name = topic.name
        guard after <= topic.seq else {
            return .reply(.error(.invalidRead("number \(after) is ahead of the topic, which is at \(topic.seq)")))
        }
        let (gap, events) = topic.replay(after: after)
        guard let gap else { return .reply(Self.page(topic, events.prefix(Int(limit)), after: after)) }
        let gone = Reply.error(.gone("message \(after + 1) is older than the history kept", oldest: gap.upperBound))
        let log = self.log
        return .later { done in
            let asked = log.older(name, after: after, through: gap.upperBound) { entries in
                // Only a log that closes the gap exactly is used; else the gap stands.
                let closes = entries.count == Int(gap.count) && entries.first?.seq == gap.lowerBound
                    && zip(entries, entries.dropFirst()).allSatisfy { $0.seq + 1 == $1.seq }
                done(closes ? Self.page(topic, (entries.map(topic.event) + events).prefix(Int(limit)), after: after) : gone)
            }
            if !asked { done(gone) }
        }
    }

    /// The most bytes of messages one page holds (one message at least): a page is built on the
    /// loop and held until its reader takes it, so its size bounds both.
    static let maxPageBytes = 1 << 20

    /// `{"topic","epoch","messages":[…],"through":N}` of `events`, each as its frame, up to
    /// `maxPageBytes`; `through` is the last number the page holds (`after` when none), where the
    /// next page starts.
    private static func page(_ topic: Topic, _ events: ArraySlice<PushEvent>, after: UInt64) -> Reply {
        var body = Array("{\"topic\":".utf8) + JSONWriter.encode(.string(topic.name))
        body += ",\"epoch\":".utf8 + JSONWriter.encode(.string(topic.epoch)) + ",\"messages\":[".utf8
        var through = after, bytes = 0
        for event in events {
            if bytes > 0 && bytes + event.json.count > maxPageBytes { break }
            if bytes > 0 { body.append(UInt8(ascii: ",")) }
            body += event.json
            bytes += event.json.count
            through = event.id ?? through
        }
        body += "],\"through\":".utf8 + JSONWriter.encode(.number(JSONNumber(through))) + "}".utf8
        return .jsonBytes(.ok, body)
    }
}

/// Where a log that answers at once leaves its answer.
private final class PublishOutcome {
    var value: Result<UInt64, StoreError> = .failure(.unavailable("the engine did not answer"))
}
