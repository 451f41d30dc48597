import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire

/// The JSON of every server message in `docs/PROTOCOL.md`. Pure: values in, bytes out.
///
/// Messages are written field by field rather than through a `JSONValue` tree, since a change set
/// is encoded on the fan-out path; only model values go through `JSONWriter`.
public enum PushEncoder {
    /// One change set; with `old`, each change carries its previous value too.
    public static func changes(_ changeSet: ChangeSet, old: Bool = false) -> [UInt8] {
        var out = head("changes")
        field("store", changeSet.store, &out)
        number("version", changeSet.version, &out)
        number("committedAt", changeSet.committedAtMicroseconds, &out)
        writeChanges(changeSet.changes, old: old, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A slow subscriber's pending change sets, folded to the latest value per (model, path).
    public static func conflated(
        store: String, version: UInt64, from: UInt64, changes: [ModelChange], old: Bool = false
    ) -> [UInt8] {
        var out = head("changes")
        field("store", store, &out)
        number("version", version, &out)
        number("from", from, &out)
        put(",\"conflated\":true", &out)
        writeChanges(changes, old: old, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A frame of a subscription with `maxRate`: the change sets after `from` up to `version`,
    /// folded to the latest value per (model, path), with the commit times of the first and last.
    public static func coalesced(
        store: String, version: UInt64, from: UInt64, firstCommittedAt: UInt64, committedAt: UInt64,
        changes: [ModelChange], old: Bool
    ) -> [UInt8] {
        var out = head("changes")
        field("store", store, &out)
        number("version", version, &out)
        number("from", from, &out)
        put(",\"conflated\":true", &out)
        number("committedAt", committedAt, &out)
        number("firstCommittedAt", firstCommittedAt, &out)
        writeChanges(changes, old: old, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `filter`: the subscription's effective options (the subscribe hook may have narrowed what
    /// it asked); their `models` and `paths` are named, so the client knows versions it is not
    /// sent are filtered out, not lost.
    public static func snapshot(_ snapshot: StoreSnapshot, reset: Bool, epoch: String, filter: SubscriptionOptions = .none) -> [UInt8] {
        var out = head("snapshot")
        field("store", snapshot.store, &out)
        number("version", snapshot.version, &out)
        field("epoch", epoch, &out)
        put(reset ? ",\"reset\":true" : ",\"reset\":false", &out)
        filterField(filter, &out)
        put(",\"models\":", &out)
        JSONWriter.write(.sortedObject(snapshot.models), to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    public static func subscribedStore(_ store: String, version: UInt64, epoch: String, filter: SubscriptionOptions = .none) -> [UInt8] {
        var out = head("subscribed")
        field("store", store, &out)
        number("version", version, &out)
        field("epoch", epoch, &out)
        filterField(filter, &out)
        put(",\"resumed\":true}", &out)
        return out
    }

    /// `,"filter":{"models":[…],"paths":[…]}`, each list only when set; nothing when neither is.
    private static func filterField(_ options: SubscriptionOptions, _ out: inout [UInt8]) {
        guard options.models != nil || options.paths != nil else { return }
        var members: [(String, JSONValue)] = []
        if let models = options.models { members.append(("models", .array(models.map { .string($0) }))) }
        if let paths = options.paths { members.append(("paths", .array(paths.map { .string($0.joined(separator: ".")) }))) }
        put(",\"filter\":", &out)
        JSONWriter.write(.object(JSONObject(uniqueKeysWithValues: members)), to: &out)
    }

    /// `reset`: the `since` asked for belongs to another life of the topic (another epoch, or a
    /// number it never reached), so the messages after `seq` follow instead.
    public static func subscribedTopic(_ topic: String, seq: UInt64, epoch: String, resumed: Bool, reset: Bool = false) -> [UInt8] {
        var out = head("subscribed")
        field("topic", topic, &out)
        number("seq", seq, &out)
        field("epoch", epoch, &out)
        if reset { put(",\"reset\":true", &out) }
        put(resumed ? ",\"resumed\":true}" : ",\"resumed\":false}", &out)
        return out
    }

    /// A topic started over (its shared log was lost): what the subscriber had not received of
    /// the old numbering may be lost, and the messages after `seq` in `epoch` follow.
    public static func topicReset(_ topic: String, seq: UInt64, epoch: String) -> [UInt8] {
        var out = head("reset")
        field("topic", topic, &out)
        number("seq", seq, &out)
        field("epoch", epoch, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A topic message. `data` is the JSON text the publisher sent (compacted, never re-encoded),
    /// written last and as it is, so every subscriber gets the publisher's bytes.
    ///
    /// Every publish makes one, so it is written in one pass into a buffer of its exact size (the
    /// fixed text, two numbers, the name and the data), with no intermediate array.
    public static func message(topic: String, seq: UInt64, publishedAt: UInt64, data: [UInt8]) -> [UInt8] {
        let plain = topic.utf8.withContiguousStorageIfAvailable { name -> [UInt8]? in
            guard !name.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return nil }
            return message(quotedName: name, seq: seq, publishedAt: publishedAt, data: data)
        }
        if let plain = plain ?? nil { return plain }
        // A name that needs escaping (never a valid one): escaped first, its quotes left out.
        var quoted: [UInt8] = []
        JSONWriter.writeString(topic, to: &quoted)
        return quoted.dropFirst().dropLast().withUnsafeBufferPointer {
            message(quotedName: $0, seq: seq, publishedAt: publishedAt, data: data)
        }
    }

    /// A topic message whose name, as it goes between the quotes, is `quotedName`.
    private static func message(quotedName name: UnsafeBufferPointer<UInt8>, seq: UInt64, publishedAt: UInt64, data: [UInt8]) -> [UInt8] {
        let count = MessageParts.fixedCount + name.count + JSONWriter.decimalCount(seq) + JSONWriter.decimalCount(publishedAt) + data.count
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var at = buffer.baseAddress!
            func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
                guard let start = bytes.baseAddress else { return }
                at.initialize(from: start, count: bytes.count)
                at += bytes.count
            }
            func copy(_ text: StaticString) {
                copy(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
            }
            copy(MessageParts.head)
            copy(name)
            copy(MessageParts.seq)
            at += JSONWriter.writeDecimal(seq, at: at)
            copy(MessageParts.publishedAt)
            at += JSONWriter.writeDecimal(publishedAt, at: at)
            copy(MessageParts.data)
            data.withUnsafeBufferPointer { copy($0) }
            at.initialize(to: UInt8(ascii: "}"))
            initialized = count
        }
    }

    /// The fixed parts of a topic's message, around its name, numbers and data.
    private enum MessageParts {
        static let head: StaticString = #"{"type":"message","topic":""#
        static let seq: StaticString = #"","seq":"#
        static let publishedAt: StaticString = #","publishedAt":"#
        static let data: StaticString = #","data":"#
        /// Every fixed byte, the closing brace included.
        static let fixedCount = head.utf8CodeUnitCount + seq.utf8CodeUnitCount + publishedAt.utf8CodeUnitCount
            + data.utf8CodeUnitCount + 1
    }

    public static func gap(topic: String, from: UInt64, to: UInt64) -> [UInt8] {
        var out = head("gap")
        field("topic", topic, &out)
        number("from", from, &out)
        number("to", to, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// With `reason`, the gateway ended the subscription (`deleted`: the store was deleted).
    public static func unsubscribed(_ target: StreamTarget, reason: String? = nil) -> [UInt8] {
        var out = head("unsubscribed")
        switch target {
        case .store(let name): field("store", name, &out)
        case .topic(let name): field("topic", name, &out)
        }
        if let reason { field("reason", reason, &out) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"type":"pong"}`, with the ping's `ref` if it had one.
    public static func pong(ref: String?) -> [UInt8] {
        var out = head("pong")
        if let ref { field("ref", ref, &out) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    public static func error(_ problem: ClientMessage.Problem) -> [UInt8] {
        var out = head("error")
        field("code", problem.code.rawValue, &out)
        field("message", problem.message, &out)
        if let ref = problem.ref { field("ref", ref, &out) }
        if let version = problem.version { number("version", version, &out) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A WebSocket publish was sequenced and is in the topic's history.
    public static func published(topic: String, seq: UInt64, ref: String?) -> [UInt8] {
        var out = head("published")
        field("topic", topic, &out)
        number("seq", seq, &out)
        if let ref { field("ref", ref, &out) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// An API key was accepted for the publishes that follow.
    public static let authenticatedKey = Array(#"{"type":"authenticated","apiKey":true}"#.utf8)

    /// The gateway is shutting down: reconnect (to any node) after the given delay.
    public static func draining(reconnectAfterMilliseconds: UInt64) -> [UInt8] {
        var out = head("draining")
        number("reconnectAfterMs", reconnectAfterMilliseconds, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A token was accepted for the subscriptions that follow.
    public static func authenticated(expiresAt: Double) -> [UInt8] {
        var out = head("authenticated")
        number("expiresAt", UInt64(min(max(0, expiresAt), 1e18)), &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    // MARK: Pieces

    // Names and fixed text are literals, copied whole (`JSONWriter.writeLiteral`): a
    // string's UTF-8 view appended piece by piece cost each message more than its values did.

    static func head(_ type: StaticString) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        put("{\"type\":\"", &out)
        put(type, &out)
        out.append(UInt8(ascii: "\""))
        return out
    }

    static func field(_ name: StaticString, _ value: String, _ out: inout [UInt8]) {
        put(",\"", &out)
        put(name, &out)
        put("\":", &out)
        JSONWriter.writeString(value, to: &out)
    }

    static func number(_ name: StaticString, _ value: UInt64, _ out: inout [UInt8]) {
        put(",\"", &out)
        put(name, &out)
        put("\":", &out)
        JSONWriter.writeDecimal(value, to: &out)
    }

    static func put(_ text: StaticString, _ out: inout [UInt8]) {
        JSONWriter.writeLiteral(text, to: &out)
    }

    private static func writeChanges(_ changes: [ModelChange], old: Bool, _ out: inout [UInt8]) {
        put(",\"changes\":[", &out)
        for (index, change) in changes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            put("{\"model\":", &out)
            JSONWriter.writeString(change.model, to: &out)
            put(",\"path\":", &out)
            JSONWriter.writeString(change.keyPath.description, to: &out)
            put(",\"kind\":\"", &out)
            out += change.kind.rawValue.utf8
            put("\",\"value\":", &out)
            JSONWriter.write(change.newValue ?? .null, to: &out)
            if old {
                put(",\"old\":", &out)
                JSONWriter.write(change.oldValue ?? .null, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
    }
}
