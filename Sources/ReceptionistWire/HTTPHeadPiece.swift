/// One piece of a request head (its target, a field's name or its value) as http-parser hands
/// it over: held where it lies in the buffer being parsed, or copied once a read ends inside it.
///
/// The held bytes belong to the caller of `HTTPRequestParser.parse`, so `copyHeld` runs before
/// that call returns. Most pieces arrive whole in one read and become a string straight from the
/// read's buffer, with no copy in between.
///
/// Pure value.
struct HTTPHeadPiece {
    private var held: UnsafeBufferPointer<UInt8>?
    private var copied: [UInt8] = []

    var isEmpty: Bool { held == nil && copied.isEmpty }

    /// The piece's first byte, if any.
    var first: UInt8? { held?.first ?? copied.first }

    /// The piece's next bytes.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        if isEmpty {
            held = bytes.assumingMemoryBound(to: UInt8.self)
            return
        }
        copyHeld()
        copied.append(contentsOf: bytes)
    }

    /// Copies the bytes still held in the buffer being parsed.
    mutating func copyHeld() {
        guard let bytes = held else { return }
        copied.append(contentsOf: bytes)
        held = nil
    }

    /// The known header field this piece names, if it is one's name.
    var knownHeader: KnownHeader? {
        if let held { return KnownHeader.named(held) }
        return copied.withUnsafeBufferPointer { KnownHeader.named($0) }
    }

    /// The piece decoded as UTF-8 (invalid bytes repaired, as `String(decoding:as:)` does).
    var string: String { decoded(trimmingEnd: false) }

    /// The piece as a field's value: without the spaces and tabs that end it, which RFC 9112
    /// §5 leaves out of the value (http-parser drops only those that begin it).
    var fieldValue: String { decoded(trimmingEnd: true) }

    private func decoded(trimmingEnd: Bool) -> String {
        func decode(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
            var end = bytes.count
            while trimmingEnd, end > 0, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<end]), as: UTF8.self)
        }
        if let held { return decode(held) }
        return copied.withUnsafeBufferPointer(decode)
    }

    mutating func clear() {
        held = nil
        if !copied.isEmpty { copied.removeAll(keepingCapacity: true) }
    }
}
