@testable import ReceptionistPush
import Testing

@Suite struct MemberListTests {
    private func subscriptions(_ count: Int, sink: FakeSink) -> [Subscription] {
        (0..<count).map { _ in Subscription(target: .topic("t"), sink: sink) }
    }

    @Test func aRemovedMembersSlotIsFilledByTheLast() {
        let sink = FakeSink()
        let all = subscriptions(4, sink: sink)
        var list = MemberList()
        for subscription in all { list.insert(subscription) }
        list.insert(all[1])  // already a member: nothing changes
        #expect(list.count == 4)
        let removed = list.remove(all[1])
        let again = list.remove(all[1])
        #expect(removed)
        #expect(!again)
        #expect(!list.contains(all[1]))
        #expect(list.count == 3)
        #expect(Set(list.map(ObjectIdentifier.init)) == Set([all[0], all[2], all[3]].map(ObjectIdentifier.init)))
        // The last member moved into the freed slot and is still found there.
        #expect(list.contains(all[3]))
        let rest = [all[3], all[0], all[2]].map { list.remove($0) }
        #expect(rest == [true, true, true])
        #expect(list.isEmpty)
    }

    @Test func aWalkSeesTheMembersAsTheyWereWhenItBegan() {
        let sink = FakeSink()
        let all = subscriptions(3, sink: sink)
        var list = MemberList()
        for subscription in all { list.insert(subscription) }
        var visited: [ObjectIdentifier] = []
        for subscription in list {
            visited.append(ObjectIdentifier(subscription))
            list.remove(all[0])
        }
        #expect(visited == all.map(ObjectIdentifier.init))
        #expect(list.count == 2)
    }
}
