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
        queue.removeFirst(2)
        #expect(firstBytes(queue) == [3, 4, 5])
        queue.append(chunk(6))
        #expect(firstBytes(queue) == [3, 4, 5, 6])
        queue.removeFirst(4)
        #expect(queue.isEmpty)
        queue.append(chunk(7))
        #expect(firstBytes(queue) == [7])
    }

    @Test func aPartlyWrittenFirstBufferKeepsItsPlace() {
        var queue = WriteQueue()
        queue.append((SharedBytes([1, 2, 3]), 0))
        queue.append(chunk(9))
        queue.consume(2)
        #expect(queue[0].offset == 2)
        #expect(firstBytes(queue) == [3, 9])
        queue.removeFirst(0)
        #expect(queue.count == 2)
        queue.removeAll()
        #expect(queue.isEmpty)
    }

    @Test func whatTheKernelTookIsDroppedWholeBuffersFirstThenInPart() {
        var queue = WriteQueue()
        queue.append((SharedBytes([1, 2, 3]), 0))
        queue.append((SharedBytes([4, 5]), 0))
        queue.append((SharedBytes([6, 7, 8, 9]), 0))
        queue.append((SharedBytes([10]), 0))
        queue.consume(0)
        #expect(queue.count == 4)
        // The first buffer and two bytes of the third: the second goes whole, the third in part.
        queue.consume(3 + 2 + 2)
        #expect(queue.count == 2)
        #expect(queue[0].offset == 2)
        #expect(firstBytes(queue) == [8, 10])
        // Exactly what is left: nothing stays, not even an empty buffer.
        queue.consume(2 + 1)
        #expect(queue.isEmpty)
    }

    @Test func theUnwrittenBytesAreVisitedInOrderUpToTheLimit() {
        var queue = WriteQueue()
        queue.append((SharedBytes([1, 2, 3]), 0))
        queue.append((SharedBytes([4, 5]), 0))
        queue.append((SharedBytes([6]), 0))
        queue.consume(1)
        var seen: [[UInt8]] = []
        let visited = queue.forEachUnwritten(upTo: 2) { base, count in
            seen.append(Array(UnsafeRawBufferPointer(start: base, count: count)))
        }
        #expect(visited == 2)
        #expect(seen == [[2, 3], [4, 5]])
        seen = []
        #expect(queue.forEachUnwritten(upTo: 9) { base, count in
            seen.append(Array(UnsafeRawBufferPointer(start: base, count: count)))
        } == 3)
        #expect(seen == [[2, 3], [4, 5], [6]])
        #expect(WriteQueue().forEachUnwritten(upTo: 4) { _, _ in Issue.record("an empty queue has nothing to visit") } == 0)
    }
}
