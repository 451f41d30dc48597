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

    /// The `redis` engine, which numbers every message when the gateway is one node of a cluster.
    var cluster: ClusterEngine? { publisher.cluster }

    /// `segments` follow `/api/topics`; `scope` is the idempotency scope of the caller's API key.
    func route(_ request: HTTPRequest, _ segments: ArraySlice<String>, scope: String) -> RouteResult {
        let method = request.method
        let path = Array(segments)
        switch path.count {
        case 0:
            guard method == .get || method == .head else { return .reply(.methodNotAllowed(method, allow: "GET, HEAD")) }
            let topics: [JSONValue] = hub.topics.values.sorted { $0.name < $1.name }.map {
                ["name": .string($0.name), "seq": .number(JSONNumber($0.seq)), "subscribers": .number(JSONNumber($0.subscriberCount))]
            }
            return .reply(.json(.ok, ["topics": .array(topics)]))
        case 2 where path[1] == "messages":
            guard method == .post else { return .reply(.methodNotAllowed(method, allow: "POST")) }
            let key: IdempotencyKey?
            switch Idempotency.key(of: request) {
            case .success(let parsed): key = parsed
            case .failure(let failure): return .reply(failure.reply)
            }
            if let cluster { return publishThroughCluster(path[0], request, cluster, key: key, scope: scope) }
            // One node: the table is in memory, so the loop may ask it.
            return .reply(idempotency.run(key, scope: scope, request: request) { publish(path[0], request) })
        default:
            return .reply(.error(.notFound, "no such resource"))
        }
    }

    /// Cluster: Redis numbers the message, and the reply waits for it (and for this node to have
    /// it in its history) on the loop; no thread does. While Redis is down the answer is 503.
    private func publishThroughCluster(
        _ name: String, _ request: HTTPRequest, _ cluster: ClusterEngine, key: IdempotencyKey?, scope: String
    ) -> RouteResult {
        let json: [UInt8]
        switch Reply.compactJSONBody(request) {
        case .success(let bytes): json = bytes
        case .failure(let failure): return .reply(failure.reply)
        }
        if let problem = hub.check(.topic(name)) { return .reply(.error(.badRequest, problem.message)) }
        guard cluster.isUp(for: name) else { return .reply(.error(.unavailable("Redis \(cluster.shard(name).endpoint) is unreachable"))) }
        let (publisher, idempotency) = (self.publisher, self.idempotency)
        return .later { done in
            idempotency.run(key, scope: scope, request: request, later: { answer in
                publisher.publish(name, data: json, through: cluster) { outcome in
                    switch outcome {
                    case .success(let seq): answer(.json(.created, ["topic": .string(name), "seq": .number(JSONNumber(seq))]))
                    case .failure(let error): answer(.error(error))
                    }
                }
            }, done: done)
        }
    }

    private func publish(_ name: String, _ request: HTTPRequest) -> Reply {
        let data: [UInt8]
        switch Reply.compactJSONBody(request) {
        case .success(let bytes): data = bytes
        case .failure(let failure): return failure.reply
        }
        switch hub.publish(topic: name, data: data, publishedAt: Clock.microsecondsSinceEpoch()) {
        case .success(let seq): return .json(.created, ["topic": .string(name), "seq": .number(JSONNumber(seq))])
        case .failure(let problem): return .error(.badRequest, problem.message)
        }
    }
}
