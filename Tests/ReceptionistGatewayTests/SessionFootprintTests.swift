import Glibc
import Logging
@testable import ReceptionistGateway
@testable import ReceptionistLoop
import ReceptionistModel
import ReceptionistPush
import ReceptionistTestSupport
import ReceptionistWire
import Testing

/// Every WebSocket connection holds a `WebSocketSession` with these inline: they are held to the
/// sizes the idle memory figure was measured with (`docs/PERFORMANCE.md`, "An idle connection").
@Suite struct SessionFootprintTests {
    @Test func aSessionsPartsKeepTheirSizes() {
        // Bytes for the header counters and flags, one word for a frame's lengths, widest fields
        // first, and one buffer for the message and any control frame inside it.
        #expect(MemoryLayout<WebSocketDecoder>.size <= 46)
        // Two instants in half a word each; the timeouts are the gateway's, not each connection's.
        #expect(MemoryLayout<WebSocketSessionState>.size == 8)
        #expect(MemoryLayout<StreamCore>.size <= 32)
        #expect(MemoryLayout<TokenBucket>.size == 8)
    }

    /// The session itself, as a WebSocket upgrade makes it: within a malloc size class of 128.
    @Test func aSessionFitsItsSizeClass() throws {
        let loop = try EventLoop()
        let config = GatewayConfig()
        let hub = PushHub(
            stores: StoreRegistry(), context: LoopExecutionContext(loop: loop), historyLimit: 10, counters: PushCounters())
        let table = NoTable()
        let services = StreamServices(
            config: config, hub: hub, publisher: TopicPublisher(hub: hub, log: MemoryTopicLog(hub: hub), rate: config.publishRate),
            access: AccessControl(apiKeys: [], tokenSecret: nil), counters: GatewayCounters(),
            logger: Logger(label: "footprint"), table: table, hooks: nil, stores: StoreRegistry(),
            handoff: JobHandoff(jobs: JobRunner(threads: 1), mailbox: loop.mailbox))
        let connection = try #require(TCPConnection(loop: loop, fd: Socket.open(family: sa_family_t(AF_INET))))
        let session = WebSocketSession(connection: connection, services: services, mode: .push)
        #expect(heapBytes(of: session) <= 120)
        connection.close()
        loop.mailbox.shutDown()
        loop.run()
        withExtendedLifetime(session) {}
    }

    private final class NoTable: SessionTable {
        func replaceSession(of connection: TCPConnection, with session: any GatewaySession) {}
        func sessionDidClose(_ connection: TCPConnection) {}
    }
}
