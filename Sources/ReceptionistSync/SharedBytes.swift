/// An immutable byte buffer that many connections can queue at once without copying.
///
/// Encode a broadcast once into `SharedBytes`, then hand the same instance to every subscriber.
///
/// Why `@unchecked Sendable` is safe: the memory is written only in `init` and freed only in
/// `deinit`; in between every access is a read.
public final class SharedBytes: @unchecked Sendable {
    /// The first byte; the loop hands it to `writev` without copying. Read only.
    public let base: UnsafeMutableRawPointer
    public let count: Int

    public init(_ bytes: some Collection<UInt8>) {
        count = bytes.count
        base = .allocate(byteCount: max(count, 1), alignment: 8)
        let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
            base.copyMemory(from: source.baseAddress!, byteCount: source.count)
        }
        if copied == nil {
            let destination = UnsafeMutableRawBufferPointer(start: base, count: count)
            _ = destination.initializeMemory(as: UInt8.self, from: bytes)
        }
    }

    /// An array's bytes, copied at once (the generic initialiser, called across the module
    /// boundary, finds the array's storage through witness calls on every response).
    public init(_ bytes: [UInt8]) {
        count = bytes.count
        base = .allocate(byteCount: max(count, 1), alignment: 8)
        let base = base
        bytes.withUnsafeBytes { source in
            if let start = source.baseAddress { base.copyMemory(from: start, byteCount: source.count) }
        }
    }

    /// `head`, `body` then `tail`, copied once each into one buffer: a frame built around a payload
    /// without building it first as an array and copying that. Arrays, not any collection: across
    /// the module boundary a generic copy ran byte by byte through witness calls (6% of an HTTP
    /// publish's instructions, for a frame header and an empty tail).
    public init(_ head: [UInt8], _ body: [UInt8], _ tail: [UInt8] = []) {
        count = head.count + body.count + tail.count
        base = .allocate(byteCount: max(count, 1), alignment: 8)
        let base = base
        func copy(_ part: [UInt8], to at: Int) {
            part.withUnsafeBytes { source in
                if let start = source.baseAddress { (base + at).copyMemory(from: start, byteCount: source.count) }
            }
        }
        copy(head, to: 0)
        copy(body, to: head.count)
        copy(tail, to: head.count + body.count)
    }

    /// `count` bytes, written once by `write` from the buffer's start: a frame laid out where it
    /// will be sent, with no array in between.
    public init(count: Int, writingWith write: (UnsafeMutableRawPointer) -> Void) {
        self.count = count
        base = .allocate(byteCount: max(count, 1), alignment: 8)
        write(base)
    }

    /// `parts` one after another, copied once into one buffer: several frames that leave
    /// together, shared as one.
    public init(joining parts: [SharedBytes]) {
        count = parts.reduce(0) { $0 + $1.count }
        base = .allocate(byteCount: max(count, 1), alignment: 8)
        var at = 0
        for part in parts {
            (base + at).copyMemory(from: part.base, byteCount: part.count)
            at += part.count
        }
    }

    public convenience init(_ string: String) {
        self.init(Array(string.utf8))
    }

    deinit {
        base.deallocate()
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    public var array: [UInt8] { withUnsafeBytes { Array($0) } }
}
