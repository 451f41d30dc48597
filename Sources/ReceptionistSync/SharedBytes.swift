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

    /// `head` then `body`, copied once each into one buffer: a frame built around a payload
    /// without building it first as an array and copying that.
    public init(_ head: some Collection<UInt8>, _ body: [UInt8], _ tail: some Collection<UInt8>) {
        count = head.count + body.count + tail.count
        base = .allocate(byteCount: max(count, 1), alignment: 8)
        var at = 0
        for byte in head {
            base.storeBytes(of: byte, toByteOffset: at, as: UInt8.self)
            at += 1
        }
        body.withUnsafeBytes { source in
            if let start = source.baseAddress { (base + at).copyMemory(from: start, byteCount: source.count) }
        }
        at += body.count
        for byte in tail {
            base.storeBytes(of: byte, toByteOffset: at, as: UInt8.self)
            at += 1
        }
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
