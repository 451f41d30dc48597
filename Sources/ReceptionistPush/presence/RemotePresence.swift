import ReceptionistJSON

/// One node's members of a topic or store as it shares them with the others:
/// `{"clients":n,"users":u,"members":[…]}`, each member as presence frames write it, and no list
/// past the node's `--presence-max-members`. Pure value.
struct RemotePresence: Equatable {
    struct Member: Equatable {
        let user: String
        /// The member's JSON, as frames carry it.
        let json: [UInt8]
    }

    var clients: Int
    /// Distinct non-empty users on that node.
    var users: Int
    /// By client id; nil when the node shared its counts only.
    var members: [UInt64: Member]?

    static func encode(clients: Int, users: Int, members: [[UInt8]]?) -> [UInt8] {
        var out = Array("{\"clients\":\(clients),\"users\":\(users)".utf8)
        if let members {
            out += ",\"members\":[".utf8
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out += member
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Every node's entry that parses, by node; one that does not is left out.
    static func parse(_ entries: [String: [UInt8]]) -> [String: RemotePresence] {
        entries.compactMapValues { parse($0) }
    }

    /// The most clients or users an entry may count: 2^32, past any node's connections, so that
    /// summing every node's never overflows.
    static let maxCount: UInt64 = 1 << 32

    /// Nil when the entry is not one (another version's, or damaged): it is then ignored.
    static func parse(_ bytes: [UInt8]) -> RemotePresence? {
        // Counts past what a node can hold are damage: `Int(_:)` would trap, and their sum with
        // others' overflow.
        guard let value = try? JSONParser.parse(bytes), let clients = value["clients"]?.uint64Value,
              let users = value["users"]?.uint64Value, clients <= maxCount, users <= maxCount
        else { return nil }
        var entry = RemotePresence(clients: Int(clients), users: Int(users), members: nil)
        guard case .array(let list)? = value["members"] else { return entry }
        var members: [UInt64: Member] = [:]
        for item in list {
            guard let client = item["client"]?.stringValue, let id = UInt64(client, radix: 16),
                  let user = item["user"]?.stringValue
            else { return nil }
            members[id] = Member(user: user, json: JSONWriter.encode(item))
        }
        entry.members = members
        return entry
    }
}
