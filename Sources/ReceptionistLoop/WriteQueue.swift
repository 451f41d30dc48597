import ReceptionistSync

/// A connection's queued outbound buffers, the oldest first, with the first held inline.
///
/// Most connections have at most one buffer queued at a time (an idle subscriber's occasional
/// frame, a reply): holding it inline means an idle connection keeps no array at all, and one
/// that only ever has one buffer queued never allocates for its queue. Buffers behind the first
/// go to `rest`, which keeps its capacity once grown, so a busy connection allocates for its
/// queue once, not at every flush.
///
/// Invariant: `rest` is empty whenever `first` is nil, so `first` is always the oldest buffer.
struct WriteQueue {
    typealias Chunk = (bytes: SharedBytes, offset: Int)

    private var first: Chunk?
    private var rest: [Chunk] = []

    var isEmpty: Bool { first == nil }
    var count: Int { first == nil ? 0 : 1 + rest.count }

    subscript(index: Int) -> Chunk {
        index == 0 ? first! : rest[index - 1]
    }

    mutating func append(_ chunk: Chunk) {
        if first == nil {
            first = chunk
        } else {
            rest.append(chunk)
        }
    }

    /// The oldest `n` buffers, in order.
    func prefix(_ n: Int) -> [Chunk] {
        let taken = min(n, count)
        guard taken > 0 else { return [] }
        var chunks: [Chunk] = []
        chunks.reserveCapacity(taken)
        chunks.append(first!)
        chunks.append(contentsOf: rest.prefix(taken - 1))
        return chunks
    }

    /// Drops the oldest `n` buffers.
    mutating func removeFirst(_ n: Int) {
        guard n > 0 else { return }
        precondition(n <= count, "removing more buffers than are queued")
        if n == count {
            first = nil
            rest.removeAll(keepingCapacity: true)
        } else {
            first = rest[n - 1]
            rest.removeFirst(n)
        }
    }

    /// Moves the oldest buffer's start past `bytes` the kernel took of it.
    mutating func advanceFirst(by bytes: Int) {
        first!.offset += bytes
    }

    mutating func removeAll() {
        first = nil
        rest = []
    }
}
