/// The subscriptions of one topic or store group, each at the slot it records
/// (`Subscription.memberSlot`).
///
/// A dictionary keyed by the subscription would cost every subscriber a bucket of key and value
/// at three quarters' load; this costs it one reference, and a fan-out walks contiguous memory.
/// A removed member's slot is filled by the last one, so the order is not the order of joining.
/// A subscription is a member of at most one list (its one topic or group).
///
/// Loop thread only.
struct MemberList: Sequence {
    private var members: ContiguousArray<Subscription> = []

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    func contains(_ subscription: Subscription) -> Bool {
        let slot = Int(subscription.memberSlot)
        return slot >= 0 && slot < members.count && members[slot] === subscription
    }

    /// Adds `subscription` unless it is a member already.
    mutating func insert(_ subscription: Subscription) {
        guard !contains(subscription) else { return }
        subscription.memberSlot = Int32(members.count)
        members.append(subscription)
    }

    /// Removes `subscription`; returns whether it was a member.
    @discardableResult
    mutating func remove(_ subscription: Subscription) -> Bool {
        guard contains(subscription) else { return false }
        let slot = Int(subscription.memberSlot)
        let last = members.removeLast()
        if slot < members.count {
            members[slot] = last
            last.memberSlot = Int32(slot)
        }
        subscription.memberSlot = -1
        return true
    }

    /// Walks the members as they were when the walk began: a member that leaves meanwhile (a slow
    /// consumer ended) neither stops the walk nor is visited twice.
    func makeIterator() -> ContiguousArray<Subscription>.Iterator {
        members.makeIterator()
    }
}
