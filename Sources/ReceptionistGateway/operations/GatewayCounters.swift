/// What the gateway's sessions count for `/metrics`; the push core counts its own
/// (`PushCounters`). Loop thread only: plain integers, no locks, so that counting costs the
/// fan-out path one add (invariant 24).
final class GatewayCounters {
    private(set) var refusals = [Int](repeating: 0, count: Refusal.allCases.count)
    var httpRequests = 0
    /// Protocol messages WebSocket clients sent.
    var webSocketMessagesIn = 0
    /// Server messages written to WebSocket and SSE streams (deliveries, snapshots, replies).
    var webSocketMessagesOut = 0
    var sseMessagesOut = 0
    /// WebSocket connections that agreed on permessage-deflate.
    var compressionNegotiated = 0
    /// Of `webSocketMessagesOut`, those sent compressed.
    var webSocketCompressedOut = 0

    func refused(_ reason: Refusal) {
        refusals[Self.index[reason]!] += 1
    }

    func count(_ reason: Refusal) -> Int { refusals[Self.index[reason]!] }

    private static let index: [Refusal: Int] = Dictionary(
        uniqueKeysWithValues: Refusal.allCases.enumerated().map { ($1, $0) })
}
