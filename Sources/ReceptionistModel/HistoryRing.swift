import DequeModule

/// The newest `capacity` elements of a numbered stream (a store's change sets by version, a
/// topic's messages by sequence number), at most `maxBytes` of them, oldest first, and what a
/// reader that stopped at some number has missed since.
///
/// Invariant: numbers rise strictly from front to back; past `capacity` elements, or `maxBytes`
/// by the sizes they were appended with, the oldest are dropped (the newest is always kept).
/// A reader is never handed a partial answer silently: what has left the ring is named as the
/// `missing` range.
///
/// Pure value.
///
/// Inlinable: the push module keeps rings of its events, and a generic ring called across the
/// module boundary ran unspecialised, looking up its tuple's metadata on every access (a
/// resume's replay spent more there than in the search itself).
public struct HistoryRing<Element> {
    public let capacity: Int
    public let maxBytes: Int
    /// The sizes of the elements kept, added up.
    @usableFromInline var kept = 0
    public var bytes: Int { kept }
    @usableFromInline var entries: Deque<(number: UInt64, element: Element, size: Int)> = []

    @inlinable
    public init(capacity: Int, maxBytes: Int = .max) {
        self.capacity = max(0, capacity)
        self.maxBytes = max(0, maxBytes)
        // A little room up front; the deque grows as the stream does (a ring per subscription
        // group must not cost its whole capacity before it is used).
        entries.reserveCapacity(min(self.capacity, 64))
    }

    @inlinable
    public var count: Int { entries.count }
    @inlinable
    public var isEmpty: Bool { entries.isEmpty }
    @inlinable
    public var oldestNumber: UInt64? { entries.first?.number }
    @inlinable
    public var newestNumber: UInt64? { entries.last?.number }

    /// Appends the element numbered `number`, which must be above every number kept, and which
    /// counts `size` bytes against `maxBytes`.
    @inlinable
    public mutating func append(_ element: Element, number: UInt64, size: Int = 0) {
        guard capacity > 0 else { return }
        precondition(entries.last.map { $0.number < number } ?? true, "history numbers must rise")
        if entries.count == capacity { kept -= entries.removeFirst().size }
        while !entries.isEmpty, kept > maxBytes - size {
            kept -= entries.removeFirst().size
        }
        entries.append((number, element, size))
        kept += size
    }

    /// Drops the oldest element; returns the size it counted, nil when there was none.
    @inlinable
    public mutating func dropOldest() -> Int? {
        guard let oldest = entries.popFirst() else { return nil }
        kept -= oldest.size
        return oldest.size
    }

    /// Forgets everything (the stream restarted or skipped ahead).
    @inlinable
    public mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        kept = 0
    }

    /// What a reader at `number` missed of a stream whose last number is `latest`: the kept
    /// elements after `number`, oldest first, and the range before them that is no longer kept
    /// (nil when nothing is missing).
    @inlinable
    public func after(_ number: UInt64, latest: UInt64) -> (missing: ClosedRange<UInt64>?, elements: [Element]) {
        guard number < latest else { return (nil, []) }
        let oldest = entries.first?.number ?? latest + 1
        let missing: ClosedRange<UInt64>? = number + 1 < oldest ? (number + 1)...(oldest - 1) : nil
        var index = firstIndex(after: number)
        var elements: [Element] = []
        elements.reserveCapacity(entries.count - index)
        while index < entries.count {
            elements.append(entries[index].element)
            index += 1
        }
        return (missing, elements)
    }

    /// The element numbered `number`, if it is kept.
    @inlinable
    public func element(numbered number: UInt64) -> Element? {
        let index = firstIndex(after: number &- 1)
        guard index < entries.count, entries[index].number == number else { return nil }
        return entries[index].element
    }

    /// The index of the first entry numbered above `number` (binary search: numbers rise).
    @inlinable
    func firstIndex(after number: UInt64) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].number <= number { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
