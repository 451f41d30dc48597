@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// The cluster as presence sees it: records what this node shares and holds every read until the
/// test answers it with the other nodes' entries.
final class FakePresenceSource: PresenceSource {
    private(set) var shared: [(target: StreamTarget, entry: [UInt8]?)] = []
    private(set) var reads: [(target: StreamTarget, done: ([String: [UInt8]]?) -> Void)] = []

    func sharePresence(_ target: StreamTarget, entry: [UInt8]?) { shared.append((target, entry)) }

    func readPresence(_ target: StreamTarget, done: @escaping ([String: [UInt8]]?) -> Void) {
        reads.append((target, done))
    }

    func answerRead(_ entries: [String: [UInt8]]) {
        reads.removeFirst().done(entries)
    }
}

/// Presence across nodes (invariant 44), on a hand-run clock.
@Suite struct ClusterPresenceTests {
    private static let interval = 1.0
    private let alive = Alive()

    private final class Alive {
        var sinks: [FakeSink] = []
    }

    private func fixture(maxMembers: Int = 1000) -> (PushFixture, FakePresenceSource) {
        let push = PushFixture(presence: PresenceSettings(intervalSeconds: Self.interval, maxMembers: maxMembers))
        let source = FakePresenceSource()
        push.hub.presenceRelay.source = source
        return (push, source)
    }

    @discardableResult
    private func join(_ push: PushFixture, _ sink: FakeSink, _ target: StreamTarget = .topic("chat"), follows: Bool = false) throws -> Subscription {
        alive.sinks.append(sink)
        return try push.hub.subscribe(sink, to: target, since: nil, presence: follows, joinedAt: 7).get()
    }

    private func tick(_ push: PushFixture) {
        push.context.advance(by: Self.interval)
        push.drain()
    }

    private func frames(_ sink: FakeSink) throws -> [JSONValue] {
        try sink.events.filter { $0.name == "presence" }.map { try JSONParser.parse($0.json) }
    }

    private func clients(_ value: JSONValue?) -> Set<String> {
        guard case .array(let items)? = value else { return [] }
        return Set(items.compactMap { $0["client"]?.stringValue })
    }

    /// Another node's entry with members `ids` (client ids), each of user `u<id>`.
    private func entry(_ ids: [UInt64]) -> [UInt8] {
        RemotePresence.encode(clients: ids.count, users: ids.count, members: ids.map { id in
            Array(#"{"client":"\#(PushEncoder.clientID(id))","user":"u\#(id)","joinedAt":5}"#.utf8)
        })
    }

    @Test func anEntryRoundTrips() throws {
        let bytes = entry([1, 0xabc])
        let parsed = try #require(RemotePresence.parse(bytes))
        #expect(parsed.clients == 2 && parsed.users == 2 && parsed.members?.count == 2)
        #expect(parsed.members?[0xabc]?.user == "u2748")
        #expect(RemotePresence.parse(Array("{\"clients\":1}".utf8)) == nil)
        // Damaged counts (past what a node can hold) are ignored, never a trap.
        #expect(RemotePresence.parse(Array(#"{"clients":18446744073709551615,"users":0}"#.utf8)) == nil)
        #expect(RemotePresence.parse(Array(#"{"clients":0,"users":9223372036854775808}"#.utf8)) == nil)
        let countsOnly = try #require(RemotePresence.parse(RemotePresence.encode(clients: 5000, users: 12, members: nil)))
        #expect(countsOnly.members == nil && countsOnly.clients == 5000)
    }

    /// A store deleted with members here takes this node's entry back at once; so does a topic
    /// forgotten with its last leave not yet shared. Before, the presence went with its feed or
    /// topic, its delayed share found nothing, and the entry stayed in the cluster.
    @Test func aDeletedStoreOrForgottenTopicTakesItsEntryBack() throws {
        let (push, source) = fixture()
        try push.createStore("s")
        try join(push, FakeSink(), .store("s"))
        tick(push)
        #expect(source.shared.last?.target == .store("s") && source.shared.last?.entry != nil)
        push.hub.storeDeleted("s")
        #expect(source.shared.last?.target == .store("s") && source.shared.last?.entry == nil)

        let member = try join(push, FakeSink(), .topic("quiet"))
        tick(push)
        #expect(source.shared.last?.target == .topic("quiet") && source.shared.last?.entry != nil)
        push.hub.unsubscribe(member)
        let before = source.shared.count
        #expect(push.hub.forgetIdleTopics(now: .max, idle: 0, release: { _ in true }) == 1)
        #expect(source.shared.count == before + 1 && source.shared.last?.target == .topic("quiet") && source.shared.last?.entry == nil)
        tick(push)
        #expect(source.shared.count == before + 1)
    }

    @Test func thisNodesMembersAreSharedOnceAnIntervalAndRemovedWhenNoneAreLeft() throws {
        let (push, source) = fixture()
        let ann = FakeSink(user: PresenceUser(user: "ann", info: nil)), bob = FakeSink()
        let first = try join(push, ann)
        let second = try join(push, bob)
        #expect(source.shared.isEmpty, "shared within an interval, not at each join")
        tick(push)
        #expect(source.shared.count == 1 && source.shared[0].target == .topic("chat"))
        let sharedEntry = try #require(source.shared[0].entry)
        let shared = try #require(RemotePresence.parse(sharedEntry))
        #expect(shared.clients == 2 && shared.users == 1)
        #expect(Set(shared.members?.keys.map { $0 } ?? []) == [ann.clientID, bob.clientID])
        push.hub.unsubscribe(first)
        push.hub.unsubscribe(second)
        tick(push)
        #expect(source.shared.count == 2 && source.shared[1].entry == nil)
    }

    @Test func aFollowerGetsTheOtherNodesMembersAsJoinsAndTheirLeaves() throws {
        let (push, source) = fixture()
        let here = FakeSink()
        try join(push, here)
        let watcher = FakeSink()
        try join(push, watcher, follows: true)
        // The whole list of this node at once, then the other nodes are read.
        #expect(try frames(watcher).count == 1 && source.reads.count == 1)
        source.answerRead(["n2": entry([101, 102]), "n3": entry([201])])
        tick(push)
        var got = try frames(watcher)
        #expect(got.count == 2)
        #expect(clients(got[1]["joins"]) == Set([101, 102, 201].map(PushEncoder.clientID)))
        #expect(got[1]["clients"]?.uint64Value == 5)
        // Node n2 changes: 102 leaves, 103 joins; read again on its notice.
        push.hub.presenceRelay.changed(.topic("chat"))
        source.answerRead(["n2": entry([101, 103]), "n3": entry([201])])
        tick(push)
        got = try frames(watcher)
        #expect(clients(got[2]["joins"]) == [PushEncoder.clientID(103)])
        #expect(clients(got[2]["leaves"]) == [PushEncoder.clientID(102)])
        // A new follower gets every node's members in one list.
        let late = FakeSink()
        try join(push, late, follows: true)
        let lateFrames = try frames(late)
        let whole = try #require(lateFrames.first)
        #expect(clients(whole["members"]).count == 6 && whole["clients"]?.uint64Value == 6)
    }

    /// A node named dead by one server leaves only the presences that server keeps: cut off
    /// from one server, it still beats on the others, and its members there stay. (They left every
    /// presence, and never came back.)
    @Test func aNodeLostOnOneServerLeavesOnlyThePresencesThatServerKeeps() throws {
        let (push, source) = fixture()
        let here = FakeSink(), there = FakeSink()
        try join(push, here, .topic("chat"), follows: true)
        try join(push, there, .topic("other"), follows: true)
        source.answerRead(["n2": entry([101])])
        source.answerRead(["n2": entry([201])])
        tick(push)
        push.hub.presenceRelay.nodesLost(["n2"], where: { $0 == "chat" })
        tick(push)
        let chat = try JSONParser.parse(push.hub.topic("chat").presence.reply(limit: 100))
        let other = try JSONParser.parse(push.hub.topic("other").presence.reply(limit: 100))
        #expect(clients(chat["members"]) == Set([here.clientID].map(PushEncoder.clientID)))
        #expect(clients(other["members"]) == Set([there.clientID, 201].map(PushEncoder.clientID)))
    }

    /// Without the heartbeat a dead node's members would stay in presence for ever.
    @Test func aNodeThatStopsBeatingLeavesWithAllItsMembers() throws {
        let (push, source) = fixture()
        let watcher = FakeSink()
        try join(push, watcher, follows: true)
        source.answerRead(["n2": entry([101, 102]), "n3": entry([201])])
        tick(push)
        push.hub.presenceRelay.nodesLost(["n2"])
        tick(push)
        let afterLoss = try frames(watcher)
        let last = try #require(afterLoss.last)
        #expect(clients(last["leaves"]) == Set([101, 102].map(PushEncoder.clientID)))
        #expect(last["clients"]?.uint64Value == 2)
        let reply = try JSONParser.parse(push.hub.topic("chat").presence.reply(limit: 100))
        #expect(clients(reply["members"]) == Set([watcher.clientID, 201].map(PushEncoder.clientID)))
    }

    @Test func pastTheCapTheCountsAddUpOverNodes() throws {
        let (push, source) = fixture(maxMembers: 3)
        let watcher = FakeSink(user: PresenceUser(user: "w", info: nil))
        try join(push, watcher, follows: true)
        source.answerRead(["n2": RemotePresence.encode(clients: 40, users: 9, members: nil)])
        tick(push)
        let counted = try frames(watcher)
        let last = try #require(counted.last)
        #expect(last["countsOnly"] == true && last["clients"]?.uint64Value == 41 && last["users"]?.uint64Value == 10)
    }

    @Test func reconnectingSharesAgainAndReadsAgain() throws {
        let (push, source) = fixture()
        try join(push, FakeSink())
        try join(push, FakeSink(), follows: true)
        let reads = source.reads.count
        tick(push)
        let shares = source.shared.count
        push.hub.presenceRelay.reshare()
        #expect(source.shared.count == shares + 1 && source.reads.count == reads + 1)
    }
}
