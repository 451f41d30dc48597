import ReceptionistJSON
import ReceptionistWire

/// The answers to a client's commits and RPCs.
extension PushEncoder {
    /// A commit over WebSocket was applied: the store's version after it.
    public static func committed(store: String, version: UInt64, ref: String?) -> [UInt8] {
        var out = head("committed")
        field("store", store, &out)
        number("version", version, &out)
        if let ref { field("ref", ref, &out) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The RPC hook's answer, as it gave it.
    public static func rpcResult(id: String, data: JSONValue) -> [UInt8] {
        var out = head("rpc_result")
        field("id", id, &out)
        out.append(contentsOf: Array(#","data":"#.utf8))
        out.append(contentsOf: JSONWriter.encode(data))
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// An RPC that has no result: the hook refused it, failed, or did not answer.
    public static func rpcError(id: String, code: String, message: String) -> [UInt8] {
        var out = head("rpc_error")
        field("id", id, &out)
        field("code", code, &out)
        field("message", message, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}
