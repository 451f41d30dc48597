import ReceptionistPush
import ReceptionistWire

extension WebSocketSession {
    /// Answers a message dropped for `--client-message-rate` as its kind is answered: a publish or
    /// a commit with `rate_limited` and its `ref`, an RPC with `rpc_error` and its `id`, so a client
    /// waiting on it is told which one was dropped; anything else with a bare `rate_limited`.
    func refuseForMessageRate(_ decoded: Result<ClientMessage, ClientMessage.Problem>) {
        let why = "too many messages; this one was dropped"
        switch decoded {
        case .success(.rpc(let id, _, _)):
            sendText(PushEncoder.rpcError(id: id, code: ClientMessage.Problem.Code.rateLimited.rawValue, message: why))
        case .success(.publish(_, _, let ref)), .success(.commit(_, _, let ref)):
            sendError(ClientMessage.Problem(.rateLimited, why, ref: ref))
        default:
            sendError(ClientMessage.Problem(.rateLimited, why))
        }
    }
}
