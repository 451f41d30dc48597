import ReceptionistJSON
import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistWire

/// `/api/topics/...`: publish and list. Topics live on the loop, so these answer at once; a publish
/// is answered after the message is sequenced, in the history, and queued to every subscriber.
///
/// Loop thread only.
struct TopicAPI {
    let hub: PushHub
    /// The `redis` engine, which numbers every message when the gateway is one node of a cluster.
    let cluster: ClusterEngine?

    /// `segments` follow `/api/topics`.
    func route(_ request: HTTPRequest, _ segments: ArraySlice<String>) -> RouteResult {
        let method = request.method
        let path = Array(segments)
        switch path.count {
        case 0:
            guard method == .get || method == .head else { return .reply(.methodNotAllowed(method, allow: "GET, HEAD")) }
            let topics: [JSONValue] = hub.topics.values.sorted { $0.name < $1.name }.map {
                ["name": .string($0.name), "seq": .number(Double($0.seq)), "subscribers": .number(Double($0.subscriberCount))]
            }
            return .reply(.json(.ok, ["topics": .array(topics)]))
        case 2 where path[1] == "messages":
            guard method == .post else { return .reply(.methodNotAllowed(method, allow: "POST")) }
            if let cluster { return publishThroughCluster(path[0], request, cluster) }
            return .reply(publish(path[0], request))
        default:
            return .reply(.error(.notFound, "no such resource"))
        }
    }

    /// Cluster: Redis numbers the message; a job thread waits for it (and for this node to have
    /// it in its history), so the loop never waits. While Redis is down the answer is 503.
    private func publishThroughCluster(_ name: String, _ request: HTTPRequest, _ cluster: ClusterEngine) -> RouteResult {
        let data: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): data = value
        case .failure(let failure): return .reply(failure.reply)
        }
        if let problem = hub.check(.topic(name)) { return .reply(.error(.badRequest, problem.message)) }
        guard cluster.isUp else { return .reply(.error(.unavailable("Redis is unreachable"))) }
        let engine = LoopBound(cluster, loop: cluster.loop)
        let mailbox = cluster.loop.mailbox
        let json = JSONWriter.encode(data)
        return .work {
            let outcome: Result<UInt64, StoreError> = LoopCall.wait(
                mailbox, seconds: RedisStoreReplication.timeoutSeconds, timedOut: .failure(.unavailable("Redis did not answer in time"))
            ) { done in
                engine.value.publish(topic: name, data: json, completion: done)
            }
            switch outcome {
            case .success(let seq): return .json(.created, ["topic": .string(name), "seq": .number(Double(seq))])
            case .failure(let error): return .error(error)
            }
        }
    }

    private func publish(_ name: String, _ request: HTTPRequest) -> Reply {
        let data: JSONValue
        switch Reply.parseJSONBody(request) {
        case .success(let value): data = value
        case .failure(let failure): return failure.reply
        }
        switch hub.publish(topic: name, data: data, publishedAt: Clock.microsecondsSinceEpoch()) {
        case .success(let seq): return .json(.created, ["topic": .string(name), "seq": .number(Double(seq))])
        case .failure(let problem): return .error(.badRequest, problem.message)
        }
    }
}
