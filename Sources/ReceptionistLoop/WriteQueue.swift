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

    /// Drops the oldest `n` buffers.
    mutating func removeFirst(_ n: Int) {
        guard n > 0 else { return }
        precondition(n <= count, "removing more buffers than are queued")
        if n == count {
            first = nil
            // Most flushes leave nothing behind the first buffer: then there is nothing to clear.
            if !rest.isEmpty { rest.removeAll(keepingCapacity: true) }
        } else {
            first = rest[n - 1]
            rest.removeFirst(n)
        }
    }

    /// Calls `body` with the start and length of each of the oldest `limit` buffers' unwritten
    /// bytes, in order, without copying a chunk out (each copy would retain its bytes); returns
    /// how many it visited.
    func forEachUnwritten(upTo limit: Int, _ body: (UnsafeRawPointer, Int) -> Void) -> Int {
        guard limit > 0, let first else { return 0 }
        body(first.bytes.base + first.offset, first.bytes.count - first.offset)
        let more = min(limit - 1, rest.count)
        rest.withUnsafeBufferPointer { chunks in
            for index in 0..<more {
                body(chunks[index].bytes.base + chunks[index].offset, chunks[index].bytes.count - chunks[index].offset)
            }
        }
        return 1 + more
    }

    /// Drops what the kernel took: `bytes` from the oldest buffers on, the last of them perhaps
    /// only in part.
    mutating func consume(_ bytes: Int) {
        guard bytes > 0, let head = first else { return }
        var left = bytes
        let firstAvailable = head.bytes.count - head.offset
        guard left >= firstAvailable else {
            first!.offset += left
            return
        }
        left -= firstAvailable
        let whole = rest.withUnsafeBufferPointer { chunks -> Int in
            var whole = 0
            while whole < chunks.count {
                let available = chunks[whole].bytes.count - chunks[whole].offset
                guard left >= available else { break }
                left -= available
                whole += 1
            }
            return whole
        }
        removeFirst(1 + whole)
        if left > 0 { first!.offset += left }
    }

    mutating func removeAll() {
        first = nil
        rest = []
    }
}
