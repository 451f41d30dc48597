import ReceptionistModel
import Testing

@Suite struct HistoryRingTests {
    /// A ring holding the letters a, b, c … numbered as given.
    private func filled(capacity: Int, numbers: [UInt64]) -> HistoryRing<String> {
        var ring = HistoryRing<String>(capacity: capacity)
        for number in numbers {
            ring.append(String(UnicodeScalar(UInt8(96 + number))), number: number)
        }
        return ring
    }

    @Test func belowCapacityEverythingIsKept() {
        let ring = filled(capacity: 5, numbers: [1, 2, 3])
        #expect(ring.capacity == 5 && ring.count == 3 && !ring.isEmpty && ring.oldestNumber == 1)
        let (missing, elements) = ring.after(0, latest: 3)
        #expect(missing == nil && elements == ["a", "b", "c"])
    }

    @Test func pastCapacityTheOldestIsDropped() {
        let ring = filled(capacity: 3, numbers: [1, 2, 3, 4, 5])
        #expect(ring.count == 3 && ring.oldestNumber == 3)
        let (missing, elements) = ring.after(0, latest: 5)
        #expect(missing == 1...2 && elements == ["c", "d", "e"])
        #expect(ring.after(1, latest: 5) == (missing: 2...2, elements: ["c", "d", "e"]))
    }

    @Test func afterInsideTheRingHasNothingMissing() {
        let ring = filled(capacity: 3, numbers: [1, 2, 3, 4, 5])
        #expect(ring.after(2, latest: 5) == (missing: nil, elements: ["c", "d", "e"]))
        #expect(ring.after(3, latest: 5) == (missing: nil, elements: ["d", "e"]))
        #expect(ring.after(4, latest: 5) == (missing: nil, elements: ["e"]))
        #expect(ring.after(5, latest: 5) == (missing: nil, elements: []))
        #expect(ring.after(9, latest: 5) == (missing: nil, elements: []), "a reader ahead of the stream missed nothing")
    }

    @Test func numbersNeedNotBeConsecutive() {
        let ring = filled(capacity: 10, numbers: [2, 5, 9])
        #expect(ring.oldestNumber == 2)
        #expect(ring.after(0, latest: 9) == (missing: 1...1, elements: ["b", "e", "i"]))
        #expect(ring.after(1, latest: 9) == (missing: nil, elements: ["b", "e", "i"]))
        #expect(ring.after(3, latest: 9) == (missing: nil, elements: ["e", "i"]))
        #expect(ring.after(5, latest: 9) == (missing: nil, elements: ["i"]))
        #expect(ring.after(8, latest: 9) == (missing: nil, elements: ["i"]))

        let small = filled(capacity: 2, numbers: [2, 5, 9])
        #expect(small.count == 2 && small.oldestNumber == 5)
        #expect(small.after(2, latest: 9) == (missing: 3...4, elements: ["e", "i"]))
        #expect(small.after(0, latest: 9) == (missing: 1...4, elements: ["e", "i"]))
    }

    @Test func capacityZeroKeepsNothingAndNamesEverythingMissed() {
        var ring = filled(capacity: 0, numbers: [1, 2, 3])
        ring.append("z", number: 1)  // no order is enforced on what is not kept
        #expect(ring.capacity == 0 && ring.count == 0 && ring.isEmpty && ring.oldestNumber == nil)
        #expect(ring.after(1, latest: 3) == (missing: 2...3, elements: []))
        #expect(ring.after(3, latest: 3) == (missing: nil, elements: []))
        #expect(HistoryRing<Int>(capacity: -4).capacity == 0)
    }

    @Test func removeAllForgetsAndTheStreamMayRestart() {
        var ring = filled(capacity: 4, numbers: [1, 2, 3])
        ring.removeAll()
        #expect(ring.isEmpty && ring.count == 0 && ring.oldestNumber == nil && ring.capacity == 4)
        #expect(ring.after(1, latest: 3) == (missing: 2...3, elements: []))
        ring.append("a", number: 1)  // numbering restarted: lower than before, allowed once emptied
        ring.append("b", number: 2)
        #expect(ring.after(0, latest: 2) == (missing: nil, elements: ["a", "b"]))
    }

    @Test func anElementIsFoundByItsNumberWhileKept() {
        var ring = HistoryRing<String>(capacity: 3)
        for (number, text) in [(2, "b"), (5, "e"), (6, "f"), (9, "i")] { ring.append(text, number: UInt64(number)) }
        #expect(ring.element(numbered: 2) == nil, "dropped past the capacity")
        #expect(ring.element(numbered: 5) == "e" && ring.element(numbered: 9) == "i")
        #expect(ring.element(numbered: 7) == nil && ring.element(numbered: 0) == nil && ring.element(numbered: 10) == nil)
        #expect(ring.oldestNumber == 5 && ring.newestNumber == 9)
    }

    /// Past `maxBytes` the oldest go, as past the capacity; the newest is kept whatever its size,
    /// and what left is named as missing.
    @Test func pastItsBytesTheOldestGoAndTheNewestStays() {
        var ring = HistoryRing<String>(capacity: 100, maxBytes: 10)
        for number in 1...4 { ring.append("x", number: UInt64(number), size: 3) }
        #expect(ring.count == 3 && ring.bytes == 9 && ring.oldestNumber == 2)
        #expect(ring.after(0, latest: 4) == (missing: 1...1, elements: ["x", "x", "x"]))
        ring.append("big", number: 5, size: 25)
        #expect(ring.count == 1 && ring.bytes == 25 && ring.oldestNumber == 5, "an element past the budget alone is kept")
        ring.append("y", number: 6, size: 1)
        #expect(ring.count == 1 && ring.bytes == 1 && ring.oldestNumber == 6)
        ring.removeAll()
        #expect(ring.bytes == 0)
    }
}
