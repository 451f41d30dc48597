import ReceptionistModel
import ReceptionistSync
import ReceptionistWire

/// What a presence answers when asked: the members and counts as the HTTP API gives them.
extension Presence {
    // MARK: Asking

    /// The members as the HTTP API answers: at most `limit` of them, with the counts.
    public func reply(limit: Int) -> [UInt8] {
        Self.reply(target, local: self, remote: remote, limit: limit, stats: false)
    }

    /// The counts alone, as the HTTP API answers `?stats=true`.
    public func statsReply() -> [UInt8] {
        Self.reply(target, local: self, remote: remote, limit: 0, stats: true)
    }

    /// The HTTP answer in a cluster: this node's members (`local`, nil when it has none) and the
    /// other nodes' `entries`, as `readPresence` gave them.
    public static func clusterReply(
        _ target: StreamTarget, local: Presence?, entries: [String: [UInt8]], limit: Int, stats: Bool
    ) -> [UInt8] {
        reply(target, local: local, remote: RemotePresence.parse(entries), limit: limit, stats: stats)
    }

    /// The answer for a topic or store nobody has subscribed to on this node.
    public static func emptyReply(_ target: StreamTarget, stats: Bool) -> [UInt8] {
        reply(target, local: nil, remote: [:], limit: 0, stats: stats)
    }

    /// `local`'s members then `remote`'s, at most `limit` in all (`"truncated"` past it, or when
    /// a node gave counts only), with the counts of all; `stats`: the counts alone.
    static func reply(
        _ target: StreamTarget, local: Presence?, remote: [String: RemotePresence], limit: Int, stats: Bool
    ) -> [UInt8] {
        let counts = counts(clients: local?.members.subscriberCount ?? 0, users: local?.users ?? [:], remote: remote)
        var out = PushEncoder.presenceReplyHead(target, counts)
        guard !stats else {
            out.append(UInt8(ascii: "}"))
            return out
        }
        out += ",\"members\":[".utf8
        var written = 0
        var truncated = false
        func add(_ write: (inout [UInt8]) -> Void) {
            guard written < limit else {
                truncated = true
                return
            }
            if written > 0 { out.append(UInt8(ascii: ",")) }
            write(&out)
            written += 1
        }
        local?.members.forEachMember { subscription in add { PushEncoder.presenceMember(subscription, &$0) } }
        for entry in remote.values {
            if entry.members == nil && entry.clients > 0 { truncated = true }
            for member in (entry.members ?? [:]).values { add { $0 += member.json } }
        }
        out.append(UInt8(ascii: "]"))
        if truncated { out += ",\"truncated\":true".utf8 }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
