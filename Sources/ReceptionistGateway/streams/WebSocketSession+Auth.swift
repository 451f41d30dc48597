import ReceptionistPush
import ReceptionistWire

/// A WebSocket client's `auth` message: a token, whose claims replace any the connection held, or
/// an API key, which lets it publish and write.
extension WebSocketSession {
    func authenticate(_ token: String) {
        switch services.access.checkToken(token) {
        case .success(let verified):
            core.claims = verified
            // A token's claims are its own: the refresh hook extends only the connect hook's grant,
            // and an answer to a refresh asked for that grant no longer applies.
            core.grantFromHook = false
            core.refreshing = false
            core.refreshAt = nil
            writeFrame(WebSocketEncoder.frame(.text, payload: PushEncoder.authenticated(expiresAt: verified.expiresAt)))
            // The new token replaces the old one for what is already followed too: the old
            // one's grants end with it, its expiry included.
            endSubscriptionsNotCovered()
        case .failure(.expired):
            services.counters.refused(.tokenExpired)
            end(.tokenExpired)
        case .failure(let failure):
            services.counters.refused(.tokenInvalid)
            sendError(ClientMessage.Problem(failure.code, failure.description))
        }
    }

    func authenticate(apiKey: String) {
        switch services.access.checkKey(presented: apiKey) {
        case .allowed(let rateKey, _):
            core.publishRateKey = rateKey
            writeFrame(WebSocketEncoder.frame(.text, payload: PushEncoder.authenticatedKey))
        case .refused(let detail), .forbidden(let detail):  // a key alone: never `forbidden`
            services.counters.refused(.apiKey)
            sendError(ClientMessage.Problem(.unauthorized, detail))
        }
    }
}
