import ReceptionistLoop
import ReceptionistWire

extension HTTPSession {
    /// A protocol the connection switches to once the current request is answered.
    enum Handover {
        case webSocket(WebSocketSession.Mode, response: [UInt8], grant: StreamGrant, deflate: PerMessageDeflate?)
        case stream(StreamTarget, StreamAsk, grant: StreamGrant)
    }

    /// Gives the connection to a WebSocket or SSE session; this session is done with it.
    func hand(over handover: Handover, remainder: [UInt8]) {
        switch handover {
        case .webSocket(let mode, let response, let grant, let deflate):
            connection.write(response)
            let session = WebSocketSession(
                connection: connection, services: services.streams, mode: mode, claims: grant.claims, deflate: deflate)
            services.table.replaceSession(of: connection, with: session)
            session.start(remainder: remainder, connect: grant.connect)
        case .stream(let target, let ask, let grant):
            let session = SSESession(connection: connection, services: services.streams, claims: grant.claims)
            services.table.replaceSession(of: connection, with: session)
            session.start(target, ask, date: services.dateCache.current, grant: grant)
        }
    }
}
