@testable import ReceptionistLoop
import ReceptionistSync
import ReceptionistTestSupport
import Glibc
import Testing

/// Every connection holds a `TCPConnection`; these hold it to the malloc size class the idle
/// memory figure was measured with (`docs/PERFORMANCE.md`, "An idle connection").
@Suite struct ConnectionFootprintTests {
    @Test func aConnectionFitsItsSizeClass() throws {
        let loop = try EventLoop()
        let connection = try #require(TCPConnection(loop: loop, fd: Socket.open(family: sa_family_t(AF_INET))))
        #expect(heapBytes(of: connection) <= 120)
        connection.close()
        loop.mailbox.shutDown()
        loop.run()
    }

    @Test func anEmptyWriteQueueHoldsNoArray() {
        var queue = WriteQueue()
        #expect(MemoryLayout<WriteQueue>.size == 24)
        let bytes = SharedBytes([1, 2, 3])
        queue.append((bytes, 0))
        queue.removeFirst(1)
        #expect(queue.isEmpty)
        // One buffer at a time never reaches the array behind the first.
        queue.append((bytes, 0))
        #expect(queue.count == 1)
    }
}
