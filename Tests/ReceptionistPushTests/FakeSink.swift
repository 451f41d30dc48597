@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistSync
import ReceptionistWire

/// A connection that records what it was given instead of writing it.
///
/// `limitReached` stands for a backlog past `--max-queued-bytes`: `send` answers `.overLimit` and
/// records nothing, while `sendOwed` still queues. `closed` stands for a closing connection: both
/// answer `.refused` and record nothing.
final class FakeSink: PushSink {
    enum Via: Equatable {
        case send
        case owed
    }

    struct Entry {
        let event: PushEvent
        let via: Via
    }

    private(set) var entries: [Entry] = []
    private(set) var slowConsumerEnds: [Subscription] = []
    var limitReached = false
    var closed = false
    /// Each fake is a connection of its own.
    let clientID: UInt64
    var presenceUser: PresenceUser?
    /// Tests run in parallel: the ids are handed out under a lock. They start far above the
    /// small literal ids tests give other nodes' members, so a fake never shares one with them,
    /// however many fakes the tests before it made.
    private static let lastClientID = PThreadLock<UInt64>(1 << 32)

    init(user: PresenceUser? = nil) {
        clientID = Self.lastClientID.withLock { id in
            id += 1
            return id
        }
        presenceUser = user
    }

    func send(_ event: PushEvent) -> SendOutcome {
        if closed { return .refused }
        if limitReached { return .overLimit }
        entries.append(Entry(event: event, via: .send))
        return .queued
    }

    @discardableResult
    func sendOwed(_ event: PushEvent) -> SendOutcome {
        if closed { return .refused }
        entries.append(Entry(event: event, via: .owed))
        return .queued
    }

    func endSlowConsumer(_ subscription: Subscription) {
        slowConsumerEnds.append(subscription)
    }

    /// Subscriptions the hub ended itself (a deleted store), in order.
    var ended: [Subscription] = []

    func subscriptionEnded(_ subscription: Subscription) {
        ended.append(subscription)
    }

    var events: [PushEvent] { entries.map(\.event) }
    /// Every event, in order, as `FakeSink.describe` writes it; a run's messages one by one.
    var trace: [String] { entries.flatMap { $0.event.run.isEmpty ? [Self.describe($0.event)] : $0.event.run.map(Self.describe) } }
    /// The events given through `sendOwed` only.
    var owed: [String] { entries.filter { $0.via == .owed }.map { Self.describe($0.event) } }
    /// The events given through `send` only.
    var sent: [String] { entries.filter { $0.via == .send }.map { Self.describe($0.event) } }

    /// The parsed JSON of the event at `index`.
    func json(_ index: Int) throws -> JSONValue {
        try JSONParser.parse(entries[index].event.json)
    }

    func clear() {
        entries.removeAll()
        slowConsumerEnds.removeAll()
    }

    /// An event in a few words, read from its JSON (so a wrong field shows in the trace):
    /// `snapshot s 3`, `snapshot s 9 reset`, `changes s 4`, `changes s 7 conflated from 2`,
    /// `subscribed s 2 resumed`, `subscribed t 5`, `message t 6`, `gap t 3...5`.
    static func describe(_ event: PushEvent) -> String {
        guard let json = try? JSONParser.parse(event.json) else { return "\(event.name) <unparsable>" }
        func number(_ key: String) -> String {
            guard let value = json[key]?.numberValue else { return "?" }
            return String(UInt64(value))
        }
        let stream = json["store"]?.stringValue ?? json["topic"]?.stringValue ?? "?"
        var words = [json["type"]?.stringValue ?? "<no type>", stream]
        switch event.name {
        case "snapshot":
            words.append(number("version"))
            if json["reset"] == true { words.append("reset") }
        case "changes":
            words.append(number("version"))
            if json["conflated"] == true { words += ["conflated", "from", number("from")] }
        case "subscribed":
            words.append(json["version"] != nil ? number("version") : number("seq"))
            if json["resumed"] == true { words.append("resumed") }
        case "message":
            words.append(number("seq"))
        case "gap":
            words.append("\(number("from"))...\(number("to"))")
        default:
            break
        }
        // The SSE id must agree with the version or sequence number in the JSON; a gap's with its
        // last lost number. A resumed topic's `subscribed` is numbered where the resume began,
        // which its JSON does not say (checked by the tests of resumes).
        let expected = event.name == "gap" ? number("to") : words.count > 2 ? words[2] : nil
        let resumedTopic = event.name == "subscribed" && json["resumed"] == true && json["topic"] != nil
        if let id = event.id, let expected, !resumedTopic, expected != String(id) { words.append("id \(id)") }
        return words.joined(separator: " ")
    }
}
