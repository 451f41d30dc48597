@testable import ReceptionistLoop
import ReceptionistSync
import Testing

@Suite struct WriteQueueTests {
    private func chunk(_ byte: UInt8) -> WriteQueue.Chunk { (SharedBytes([byte, byte]), 0) }

    private func firstBytes(_ queue: WriteQueue) -> [UInt8] {
        (0..<queue.count).map { queue[$0].bytes.base.load(fromByteOffset: queue[$0].offset, as: UInt8.self) }
    }

    @Test func buffersLeaveInTheOrderTheyCame() {
        var queue = WriteQueue()
        for byte in UInt8(1)...5 { queue.append(chunk(byte)) }
        #expect(queue.count == 5)
        #expect(firstBytes(queue) == [1, 2, 3, 4, 5])
        #expect(queue.prefix(3).map { $0.bytes.base.load(as: UInt8.self) } == [1, 2, 3])
        #expect(queue.prefix(9).count == 5)
        queue.removeFirst(2)
        #expect(firstBytes(queue) == [3, 4, 5])
        queue.append(chunk(6))
        #expect(firstBytes(queue) == [3, 4, 5, 6])
        queue.removeFirst(4)
        #expect(queue.isEmpty)
        #expect(queue.prefix(2).isEmpty)
        queue.append(chunk(7))
        #expect(firstBytes(queue) == [7])
    }

    @Test func aPartlyWrittenFirstBufferKeepsItsPlace() {
        var queue = WriteQueue()
        queue.append((SharedBytes([1, 2, 3]), 0))
        queue.append(chunk(9))
        queue.advanceFirst(by: 2)
        #expect(queue[0].offset == 2)
        #expect(firstBytes(queue) == [3, 9])
        queue.removeFirst(0)
        #expect(queue.count == 2)
        queue.removeAll()
        #expect(queue.isEmpty)
    }
}
