import FuzzSupport
import ReceptionistJSON
import ReceptionistWire

/// Fuzzes `ClientMessage.decode` and the `JSONParser` under it.
///
/// Input: the message text itself. A value the parser accepts must survive `JSONWriter` and a
/// second parse unchanged, a parse error must point inside the text, validating alone must
/// accept or refuse exactly as parsing does (with the same error), and a decoded message must
/// decode the same from its canonical form.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientMessage(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let text = Array(UnsafeBufferPointer(start: size > 0 ? data : nil, count: size))

    let parsed: JSONValue?
    var parseError: JSONParser.Error?
    do {
        let value = try JSONParser.parse(text)
        let written = JSONWriter.encode(value)
        let again = try? JSONParser.parse(written)
        fuzzCheck(again == value, "JSON changed through the writer: \(JSONWriter.string(value))")
        fuzzCheck(again.map(JSONWriter.encode) == written, "the writer is not stable: \(JSONWriter.string(value))")
        parsed = value
    } catch {
        fuzzCheck(error.offset >= 0 && error.offset <= text.count, "error offset \(error.offset) outside \(text.count) bytes")
        parsed = nil
        parseError = error
    }
    do {
        try JSONParser.validate(text)
        fuzzCheck(parseError == nil, "validating accepts text parsing refuses")
    } catch {
        fuzzCheck(error == parseError, "validating refused with \(error), parsing with \(parseError.map { "\($0)" } ?? "nothing")")
    }

    switch ClientMessage.decode(text) {
    case .success(let message):
        fuzzCheck(parsed != nil, "a message decoded from text the parser refuses")
        let canonical = JSONWriter.encode(canonicalJSON(message))
        let again = ClientMessage.decode(canonical)
        if case .publish(let topic, let data, let ref) = message {
            // The data is the client's own text, which the canonical form writes anew (escapes
            // may differ): the same value, not the same bytes.
            guard case .success(.publish(let otherTopic, let otherData, let otherRef)) = again else {
                fuzzCheck(false, "\(message) does not survive its canonical form")
                return 0
            }
            fuzzCheck(topic == otherTopic && ref == otherRef && (try? JSONParser.parse(data)) == (try? JSONParser.parse(otherData)),
                      "\(message) does not survive its canonical form")
            fuzzCheck((try? JSONParser.compact(data)) == data, "publish data \(data) is not compact JSON text")
        } else {
            fuzzCheck(again == .success(message), "\(message) does not survive its canonical form")
        }
        if case .subscribe(_, let since?, _, _, _) = message {
            fuzzCheck(since <= 9_007_199_254_740_991, "since \(since) beyond 2^53 - 1")
        }
    case .failure(let problem):
        fuzzCheck([.badMessage, .unknownType].contains(problem.code), "unknown problem code \(problem.code.rawValue)")
        fuzzCheck((parsed == nil) == problem.message.hasPrefix("not JSON"), "parser and decoder disagree: \(problem.message)")
    }
    return 0
}

/// The message as `docs/PROTOCOL.md` writes it.
func canonicalJSON(_ message: ClientMessage) -> JSONValue {
    var members = JSONObject()
    let target: StreamTarget
    switch message {
    case .subscribe(let subscribed, let since, let epoch, let options, let presence):
        members["type"] = "subscribe"
        target = subscribed
        if let since { members["since"] = .number(JSONNumber(since)) }
        if let epoch { members["epoch"] = .string(epoch) }
        if let models = options.models { members["models"] = .array(models.map { .string($0) }) }
        if let paths = options.paths { members["paths"] = .array(paths.map { .string($0.joined(separator: ".")) }) }
        if let maxRate = options.maxRate { members["maxRate"] = .number(JSONNumber(maxRate)) }
        if options.old { members["old"] = true }
        if presence { members["presence"] = true }
    case .authenticate(let token):
        return ["type": "auth", "token": .string(token)]
    case .authenticateKey(let key):
        return ["type": "auth", "apiKey": .string(key)]
    case .publish(let topic, let data, let ref):
        var publish: JSONObject = ["type": "publish", "topic": .string(topic)]
        publish["data"] = (try? JSONParser.parse(data)) ?? .null
        if let ref { publish["ref"] = .string(ref) }
        return .object(publish)
    case .rpc(let id, let method, let data):
        return ["type": "rpc", "id": .string(id), "method": .string(method), "data": data]
    case .commit(_, let request, _):
        // The message itself is what the gateway reads a commit from.
        return request
    case .ping(let ref):
        return ref.map { ["type": "ping", "ref": .string($0)] } ?? ["type": "ping"]
    case .unsubscribe(let unsubscribed):
        members["type"] = "unsubscribe"
        target = unsubscribed
    }
    switch target {
    case .store(let name): members["store"] = .string(name)
    case .topic(let name): members["topic"] = .string(name)
    }
    return .object(members)
}

@main
enum FuzzClientMessageMain {
    static func main() {
        FuzzDriver.main(fuzzClientMessage)
    }
}
