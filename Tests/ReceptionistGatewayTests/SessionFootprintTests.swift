@testable import ReceptionistGateway
import ReceptionistWire
import Testing

/// Every WebSocket connection holds a `WebSocketSession` with these inline: they are held to the
/// sizes the idle memory figure was measured with (`docs/PERFORMANCE.md`, "An idle connection").
@Suite struct SessionFootprintTests {
    @Test func aSessionsPartsKeepTheirSizes() {
        // Bytes for the header counters and flags, half words for the lengths, widest fields first,
        // and one buffer for the message and any control frame inside it.
        #expect(MemoryLayout<WebSocketDecoder>.size <= 54)
        // Two instants; the timeouts are the gateway's, not each connection's.
        #expect(MemoryLayout<WebSocketSessionState>.size == 16)
        #expect(MemoryLayout<StreamCore>.size <= 32)
        #expect(MemoryLayout<TokenBucket>.size == 8)
    }
}
