import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// A presence's side of the cluster: this node's entry, shared with the others, and theirs merged in.
extension Presence {
    // MARK: The cluster

    /// This node's entry, as the other nodes read it.
    func entry() -> [UInt8] {
        let count = members.subscriberCount
        var list: [[UInt8]]?
        if count <= settings.maxMembers {
            var all: [[UInt8]] = []
            all.reserveCapacity(count)
            members.forEachMember { subscription in
                var out: [UInt8] = []
                PushEncoder.presenceMember(subscription, &out)
                all.append(out)
            }
            list = all
        }
        return RemotePresence.encode(clients: count, users: users.count, members: list)
    }

    /// Shares this node's entry within an interval of the first change (one write for many).
    func scheduleShare() {
        guard relay?.source != nil, !shareDue else { return }
        shareDue = true
        afterInterval { $0.share() }
    }

    /// Shares this node's entry now (nil once it has no members).
    func share() {
        shareDue = false
        guard let source = relay?.source else { return }
        entryShared = members.subscriberCount > 0
        source.sharePresence(target, entry: entryShared ? entry() : nil)
    }

    /// Reads the other nodes' entries again, if anyone here follows this presence.
    func refreshIfFollowed() {
        guard !followers.isEmpty, let source = relay?.source else { return }
        let presence = ThreadBound(PresenceReference(self))
        source.readPresence(target) { entries in
            guard let entries, let presence = presence.value.presence, !presence.followers.isEmpty else { return }
            presence.merge(RemotePresence.parse(entries))
        }
    }

    /// These nodes are gone: their members leave.
    func dropNodes(_ nodes: Set<String>) {
        guard remote.keys.contains(where: nodes.contains) else { return }
        merge(remote.filter { !nodes.contains($0.key) })
    }

    /// Takes `latest` as the other nodes' members: each member new or changed is a join, each
    /// one gone a leave, collected for the next flush like this node's own.
    func merge(_ latest: [String: RemotePresence]) {
        guard latest != remote else { return }
        let before = remote
        remote = latest
        guard !followers.isEmpty else { return }
        for node in Set(before.keys).union(latest.keys) {
            let old = before[node]?.members ?? [:]
            let new = latest[node]?.members ?? [:]
            for (client, member) in new where old[client] != member {
                pending[client] = .joinedElsewhere(member)
            }
            for (client, member) in old where new[client] == nil {
                pending[client] = .left(user: member.user)
            }
        }
        scheduleFlush()
    }
}
