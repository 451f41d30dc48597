@testable import ReceptionistPush
import ReceptionistJSON
import ReceptionistModel
import ReceptionistWire
import Testing

/// Presence on a hand-run clock: who is a member, what followers are sent and when (invariant 36).
@Suite struct PresenceTests {
    private static let interval = 1.0
    /// Subscriptions hold their sink unowned, as a session outlives its subscriptions: the test
    /// keeps every sink it made alive for as long as it runs.
    private let alive = Alive()

    private final class Alive {
        var sinks: [FakeSink] = []
    }

    private func fixture(maxMembers: Int = 1000) -> PushFixture {
        PushFixture(presence: PresenceSettings(intervalSeconds: Self.interval, maxMembers: maxMembers))
    }

    @discardableResult
    private func join(
        _ push: PushFixture, _ sink: FakeSink, _ target: StreamTarget = .topic("chat"), follows: Bool = false, at: UInt64 = 7
    ) throws -> Subscription {
        alive.sinks.append(sink)
        return try push.hub.subscribe(sink, to: target, since: nil, presence: follows, joinedAt: at).get()
    }

    /// The presence frames `sink` was given, parsed.
    private func frames(_ sink: FakeSink) throws -> [JSONValue] {
        try sink.events.filter { $0.name == "presence" }.map { try JSONParser.parse($0.json) }
    }

    private func clients(_ members: JSONValue?) -> Set<String> {
        Set(items(members).compactMap { $0["client"]?.stringValue })
    }

    private func items(_ value: JSONValue?) -> [JSONValue] {
        guard case .array(let items)? = value else { return [] }
        return items
    }

    private func id(_ sink: FakeSink) -> String { PushEncoder.clientID(sink.clientID) }

    /// Moves the clock on by one interval and runs what fell due.
    private func tick(_ push: PushFixture) {
        push.context.advance(by: Self.interval)
        push.drain()
    }

    @Test func aFollowerIsSentEveryMemberItselfIncludedWithTheCounts() throws {
        let push = fixture()
        let ann = FakeSink(user: PresenceUser(user: "ann", info: Array(#"{"name":"Ann","seat":3}"#.utf8)))
        let bob = FakeSink()
        try join(push, ann, at: 100)
        try join(push, bob, at: 200)
        let watcher = FakeSink(user: PresenceUser(user: "ann", info: nil))
        try join(push, watcher, follows: true, at: 300)

        let frames = try frames(watcher)
        #expect(frames.count == 1)
        #expect(watcher.owed.contains("presence chat"), "the first list is owed, past the live limit")
        #expect(frames[0]["clients"] == 3 && frames[0]["users"] == 1, "ann twice and an anonymous client: one user")
        #expect(clients(frames[0]["members"]) == [id(ann), id(bob), id(watcher)])
        let annEntry = items(frames[0]["members"]).first { $0["client"]?.stringValue == id(ann) }
        #expect(annEntry == ["client": .string(id(ann)), "user": "ann", "info": ["name": "Ann", "seat": 3], "joinedAt": 100])
        let bobEntry = items(frames[0]["members"]).first { $0["client"]?.stringValue == id(bob) }
        #expect(bobEntry == ["client": .string(id(bob)), "user": "", "joinedAt": 200])
        #expect(id(ann).count == 16 && id(ann).allSatisfy(\.isHexDigit))
    }

    @Test func joinsAndLeavesWaitOneIntervalAndGoOutAsOneSharedFrame() throws {
        let push = fixture()
        let first = FakeSink(), second = FakeSink()
        try join(push, first, follows: true)
        try join(push, second, follows: true)
        tick(push)
        first.clear()
        second.clear()
        let cy = FakeSink(user: PresenceUser(user: "cy", info: nil)), dee = FakeSink()
        try join(push, cy)
        try join(push, dee)
        push.drain()
        #expect(try frames(first).isEmpty, "nothing goes out before the interval is over")
        #expect(push.context.waiting == 1, "one delayed flush for every change of the interval")

        tick(push)
        let frame = try #require(try frames(first).first)
        #expect(try frames(first).count == 1)
        #expect(clients(frame["joins"]) == [id(cy), id(dee)])
        #expect(frame["leaves"] == [])
        #expect(frame["clients"] == 4 && frame["users"] == 1)
        #expect(first.events.last === second.events.last, "one event, encoded once, for every follower")
        #expect(first.sent == ["presence chat"], "a live frame obeys the live limit")

        push.hub.unsubscribe(push.hub.topics["chat"]!.subscriptionOf(cy)!)
        tick(push)
        let leave = try frames(first)[1]
        #expect(leave["leaves"] == [["client": .string(id(cy)), "user": "cy"]])
        #expect(leave["joins"] == [] && leave["clients"] == 3 && leave["users"] == 0)

        tick(push)
        #expect(try frames(first).count == 2, "a quiet interval sends nothing")
    }

    @Test func aJoinAndALeaveWithinOneIntervalCancelOut() throws {
        let push = fixture()
        let follower = FakeSink()
        try join(push, follower, follows: true)
        let brief = FakeSink(), stays = FakeSink()
        let subscription = try join(push, brief)
        try join(push, stays)
        push.hub.unsubscribe(subscription)
        tick(push)
        let frame = try #require(try frames(follower).last)
        #expect(clients(frame["joins"]) == [id(stays)], "the brief client is in neither list")
        #expect(frame["leaves"] == [])

        // Alone, a join and a leave send nothing at all.
        let other = try join(push, FakeSink())
        push.hub.unsubscribe(other)
        tick(push)
        #expect(try frames(follower).count == 2)
    }

    /// A follower that comes while a join is pending is sent the member in its whole list: the
    /// member's leave within the same interval reaches it, not cancelled out with the join. (It
    /// kept the member for good, while the counts said it had left.)
    @Test func aLeaveOfAMemberAWholeListNamedIsSentThoughItsJoinWasPending() throws {
        let push = fixture()
        let early = FakeSink()
        try join(push, early, follows: true)
        let brief = FakeSink()
        let subscription = try join(push, brief)
        let late = FakeSink()
        try join(push, late, follows: true)
        #expect(clients(try #require(try frames(late).first)["members"]).contains(id(brief)))
        push.hub.unsubscribe(subscription)
        tick(push)
        let frame = try #require(try frames(late).last)
        #expect(frame["leaves"] == [["client": .string(id(brief)), "user": ""]])
        #expect(!clients(frame["joins"]).contains(id(brief)))
        #expect(frame["clients"] == 2)
    }

    @Test func aLeaveThenAJoinOfOneClientIsAJoin() throws {
        let push = fixture()
        let follower = FakeSink(), client = FakeSink()
        try join(push, follower, follows: true)
        let before = try join(push, client, at: 1)
        tick(push)
        push.hub.unsubscribe(before)
        try join(push, client, at: 2)
        tick(push)
        let frame = try #require(try frames(follower).last)
        #expect(frame["joins"] == [["client": .string(id(client)), "user": "", "joinedAt": 2]])
        #expect(frame["leaves"] == [] && frame["clients"] == 2)
    }

    /// A member the followers know leaves, joins again and leaves again within one interval: the
    /// followers hear it left. (The second leave undid the join as if it were new, and the leave
    /// it had replaced was lost: the member stayed in every follower's list.)
    @Test func aLeaveAJoinAndALeaveOfAKnownMemberIsALeave() throws {
        let push = fixture()
        let follower = FakeSink(), client = FakeSink()
        try join(push, follower, follows: true)
        let first = try join(push, client, at: 1)
        tick(push)
        push.hub.unsubscribe(first)
        let second = try join(push, client, at: 2)
        push.hub.unsubscribe(second)
        tick(push)
        let frame = try #require(try frames(follower).last)
        #expect(frame["joins"] == [])
        #expect(frame["leaves"] == [["client": .string(id(client)), "user": ""]])
        #expect(frame["clients"] == 1)
    }

    @Test func nothingIsCollectedWhileNobodyFollows() throws {
        let push = fixture()
        for _ in 0..<5 { try join(push, FakeSink()) }
        #expect(push.context.waiting == 0, "no flush is scheduled without followers")
        #expect(push.hub.presence(of: .topic("chat"))?.counts == Presence.Counts(clients: 5, users: 0))
    }

    @Test func aLeaveCountsAgainstTheUserItsJoinCountedFor() throws {
        let push = fixture()
        let sink = FakeSink(user: PresenceUser(user: "ann", info: nil))
        let subscription = try join(push, sink)
        sink.presenceUser = PresenceUser(user: "bob", info: nil)
        try join(push, FakeSink(user: PresenceUser(user: "bob", info: nil)))
        #expect(push.hub.presence(of: .topic("chat"))?.counts == Presence.Counts(clients: 2, users: 2))
        push.hub.unsubscribe(subscription)
        #expect(push.hub.presence(of: .topic("chat"))?.counts == Presence.Counts(clients: 1, users: 1), "bob is still there")
    }

    @Test func pastTheCapFollowersGetCountsOnlyAndTheListAgainBelowIt() throws {
        let push = fixture(maxMembers: 2)
        let follower = FakeSink()
        try join(push, follower, follows: true)
        let second = try join(push, FakeSink())
        tick(push)
        let third = try join(push, FakeSink(user: PresenceUser(user: "u", info: nil)))
        tick(push)
        var all = try frames(follower)
        #expect(all.count == 3)
        #expect(all[2] == ["type": "presence", "topic": "chat", "clients": 3, "users": 1, "countsOnly": true])

        // A join and a leave that leave the counts as they were send nothing in counts mode.
        let brief = try join(push, FakeSink())
        push.hub.unsubscribe(brief)
        tick(push)
        #expect(try frames(follower).count == 3)

        // A new follower past the cap gets the counts, not the list.
        let late = FakeSink()
        try join(push, late, follows: true)
        #expect(try frames(late).last?["countsOnly"] == true)
        tick(push)

        push.hub.unsubscribe(third)
        push.hub.unsubscribe(second)
        tick(push)
        all = try frames(follower)
        let back = try #require(all.last)
        #expect(back["countsOnly"] == nil)
        #expect(clients(back["members"]) == [id(follower), id(late)], "at the cap again, the whole list")
        #expect(try frames(late).last?["members"] != nil, "every follower that held counts gets the list")
    }

    /// Past the cap, a follower that came between flushes was sent counts the others were not;
    /// a leave that brought the counts back to what the last flush reported sent it nothing, and
    /// it kept counts one too many for good. It gets the counts now.
    @Test func pastTheCapAFollowerSentNewerCountsIsToldWhenTheyGoBack() throws {
        let push = fixture(maxMembers: 2)
        let first = FakeSink()
        try join(push, first, follows: true)
        let leaving = try join(push, FakeSink())
        try join(push, FakeSink())
        tick(push)
        #expect(try frames(first).last?["clients"] == 3)
        let late = FakeSink()
        try join(push, late, follows: true)
        #expect(try frames(late).last?["clients"] == 4, "its whole presence, itself counted")
        push.hub.unsubscribe(leaving)
        tick(push)
        #expect(try frames(late).last?["clients"] == 3, "back to what the last flush reported")
        #expect(try frames(first).last?["clients"] == 3)
    }

    @Test func aFollowerThatCannotTakeAFrameGetsTheWholeListOnceDrained() throws {
        let push = fixture()
        let slow = FakeSink(), other = FakeSink()
        let subscription = try join(push, slow, follows: true)
        try join(push, other, follows: true)
        slow.limitReached = true
        let gone = try join(push, FakeSink())
        tick(push)
        #expect(try frames(slow).count == 1, "the frame was not queued")
        push.hub.unsubscribe(gone)
        let newcomer = FakeSink()
        try join(push, newcomer)
        tick(push)
        #expect(try frames(slow).count == 1, "a stale follower is not sent pieces it cannot apply")
        #expect(try frames(other).count == 3)

        slow.limitReached = false
        subscription.flushPresence()
        let whole = try #require(try frames(slow).last)
        #expect(clients(whole["members"]) == [id(slow), id(other), id(newcomer)], "the whole list, as it is now")
        #expect(slow.owed.last == "presence chat")
        subscription.flushPresence()
        #expect(try frames(slow).count == 2, "once resynced, draining again sends nothing")

        try join(push, FakeSink())
        tick(push)
        #expect(try frames(slow).last?["joins"] != nil, "and the changes follow again")
    }

    @Test func storesHavePresenceToo() throws {
        let push = fixture()
        try push.createStore("tiles")
        let follower = FakeSink()
        try join(push, follower, .store("tiles"), follows: true)
        #expect(follower.trace.first == "snapshot tiles 0", "the snapshot comes first")
        let narrow = FakeSink()
        alive.sinks.append(narrow)
        _ = try push.hub.subscribe(
            narrow, to: .store("tiles"), since: nil, options: SubscriptionOptions(paths: [["color"]]), joinedAt: 9
        ).get()
        tick(push)
        let frame = try #require(try frames(follower).last)
        #expect(frame["store"] == "tiles" && frame["clients"] == 2, "members of every group count")
        #expect(clients(frame["joins"]) == [id(narrow)])
    }

    @Test func theHTTPAnswerListsAtMostTheLimitAndSaysSo() throws {
        let push = fixture()
        for _ in 0..<3 { try join(push, FakeSink(user: PresenceUser(user: "x", info: nil))) }
        let presence = try #require(push.hub.presence(of: .topic("chat")))
        let all = try JSONParser.parse(presence.reply(limit: 10))
        #expect(all["topic"] == "chat" && all["clients"] == 3 && all["users"] == 1)
        #expect(items(all["members"]).count == 3 && all["truncated"] == nil)
        let two = try JSONParser.parse(presence.reply(limit: 2))
        #expect(items(two["members"]).count == 2 && two["truncated"] == true)
        #expect(try JSONParser.parse(presence.statsReply()) == ["topic": "chat", "clients": 3, "users": 1])
        #expect(try JSONParser.parse(Presence.emptyReply(.store("s"), stats: false)) == ["store": "s", "clients": 0, "users": 0, "members": []])
    }
}

extension Topic {
    /// The subscription of `sink`, if it has one here.
    fileprivate func subscriptionOf(_ sink: FakeSink) -> Subscription? {
        var found: Subscription?
        forEachMember { if $0.sink === sink { found = $0 } }
        return found
    }
}
