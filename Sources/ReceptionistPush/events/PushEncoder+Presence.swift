import ReceptionistJSON
import ReceptionistWire

/// The JSON of presence frames and of the HTTP presence answers (`docs/PROTOCOL.md`, Presence).
extension PushEncoder {
    /// A client id as the protocol writes it: 16 lowercase hex digits.
    public static func clientID(_ id: UInt64) -> String {
        let digits = String(id, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// `{"type":"presence","topic":…,"clients":…,"users":…`, left open for the rest.
    static func presenceHead(_ target: StreamTarget, _ counts: Presence.Counts) -> [UInt8] {
        var out = head("presence")
        targetField(target, &out)
        countFields(counts, &out)
        return out
    }

    /// The frame past `--presence-max-members`: the counts, and no list.
    static func presenceCounts(_ target: StreamTarget, _ counts: Presence.Counts) -> [UInt8] {
        var out = presenceHead(target, counts)
        out += ",\"countsOnly\":true}".utf8
        return out
    }

    /// `{"topic":…,"clients":…,"users":…`, the HTTP answer left open for the rest.
    static func presenceReplyHead(_ target: StreamTarget, _ counts: Presence.Counts) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "{")]
        targetField(target, &out)
        out.remove(at: 1)  // the comma `field` puts before every member
        countFields(counts, &out)
        return out
    }

    /// One member: `{"client":…,"user":…,"info":{…},"joinedAt":…}`; `info` is the token's text.
    static func presenceMember(_ subscription: Subscription, _ out: inout [UInt8]) {
        out += "{\"client\":\"".utf8
        out += clientID(subscription.sink.clientID).utf8
        out += "\",\"user\":".utf8
        JSONWriter.writeString(subscription.member?.user ?? "", to: &out)
        if let info = subscription.member?.info {
            out += ",\"info\":".utf8
            out += info
        }
        number("joinedAt", subscription.joinedAt, &out)
        out.append(UInt8(ascii: "}"))
    }

    static func presenceLeave(client: UInt64, user: String, _ out: inout [UInt8]) {
        out += "{\"client\":\"".utf8
        out += clientID(client).utf8
        out += "\",\"user\":".utf8
        JSONWriter.writeString(user, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    private static func targetField(_ target: StreamTarget, _ out: inout [UInt8]) {
        switch target {
        case .store(let name): field("store", name, &out)
        case .topic(let name): field("topic", name, &out)
        }
    }

    private static func countFields(_ counts: Presence.Counts, _ out: inout [UInt8]) {
        number("clients", UInt64(counts.clients), &out)
        number("users", UInt64(counts.users), &out)
    }
}
