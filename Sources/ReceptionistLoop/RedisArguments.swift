import ReceptionistJSON

/// A Redis command's arguments laid out as RESP bulk strings, the way Redis reads them, built
/// straight into one buffer: no argument is copied into an array of its own first, and no number
/// is made into a `String`. `command(_:)` puts the array's header and the leading words (the
/// command's name) in front, for `RedisConnection.send(command:reply:)`.
///
/// Pure value.
public struct RedisArguments: Sendable, Equatable {
    /// How many arguments.
    public private(set) var count = 0
    /// Each argument as `$<length>\r\n<bytes>\r\n`, in order.
    public private(set) var bytes: [UInt8] = []

    /// Room for about `capacity` bytes of RESP.
    public init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// A whole command laid out from its start: the array's header, for `name` and `arguments`
    /// more, then `name`. Append exactly `arguments` more and `bytes` is the command, sent as it
    /// is, where `command(_:)` copies what was appended behind a header. For a short command sent
    /// often (`XREAD`, after every notice).
    public init(command name: String, arguments: Int, capacity: Int = 64) {
        self.init(capacity: capacity)
        bytes.append(UInt8(ascii: "*"))
        JSONWriter.writeDecimal(UInt64(arguments + 1), to: &bytes)
        end()
        append(name)
    }

    public init(_ arguments: [[UInt8]]) {
        self.init(capacity: arguments.reduce(0) { $0 + $1.count + 16 })
        for argument in arguments { append(argument) }
    }

    public init(_ arguments: [String]) {
        self.init(capacity: arguments.reduce(0) { $0 + $1.utf8.count + 16 })
        for argument in arguments { append(argument) }
    }

    public mutating func append(_ argument: [UInt8]) {
        header(argument.count)
        bytes += argument
        end()
    }

    public mutating func append(_ text: String) {
        header(text.utf8.count)
        appendText(text)
        end()
    }

    /// One argument of texts end to end (a key's prefix, a name and a suffix, say), written as
    /// they are, never joined into a `String` first.
    public mutating func append(_ first: String, _ second: String, _ third: String = "") {
        header(first.utf8.count + second.utf8.count + third.utf8.count)
        appendText(first)
        appendText(second)
        appendText(third)
        end()
    }

    /// A number, as its decimal digits: header, digits and line end laid out on the stack and
    /// appended as one copy (appended piece by piece, a timestamp cost about 570 instructions).
    public mutating func append(_ value: UInt64) {
        count += 1
        appendScratch { start in
            let digits = JSONWriter.decimalCount(value)
            var end = Self.writeHeader(digits, at: start)
            end += JSONWriter.writeDecimal(value, at: start + end)
            start[end] = 13
            start[end + 1] = 10
            return end + 2
        }
    }

    /// A count or a bound; never negative.
    public mutating func append(_ value: Int) {
        precondition(value >= 0, "a Redis argument count or bound is never negative")
        append(UInt64(value))
    }

    /// The whole command: the array's header, `words` (the command's name, say), then these
    /// arguments.
    public func command(_ words: String...) -> [UInt8] {
        // Laid out in one buffer, sized once: the header, the words, then these arguments.
        var out = RedisArguments(capacity: 16 + words.reduce(0) { $0 + $1.utf8.count + 16 } + bytes.count)
        out.bytes.append(UInt8(ascii: "*"))
        JSONWriter.writeDecimal(UInt64(words.count + count), to: &out.bytes)
        out.end()
        for word in words { out.append(word) }
        out.bytes += bytes
        return out.bytes
    }

    private mutating func header(_ length: Int) {
        count += 1
        appendScratch { Self.writeHeader(length, at: $0) }
    }

    /// `$<length>\r\n` from `start`; returns how many bytes (at most 23).
    private static func writeHeader(_ length: Int, at start: UnsafeMutablePointer<UInt8>) -> Int {
        start[0] = UInt8(ascii: "$")
        let digits = JSONWriter.writeDecimal(UInt64(length), at: start + 1)
        start[digits + 1] = 13
        start[digits + 2] = 10
        return digits + 3
    }

    /// Appends what `write` lays out (at most 48 bytes) on the stack, as one copy.
    private mutating func appendScratch(_ write: (UnsafeMutablePointer<UInt8>) -> Int) {
        var scratch: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { raw in
            let start = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let count = write(start)
            bytes.append(contentsOf: UnsafeBufferPointer(start: start, count: count))
        }
    }

    /// A text's bytes, copied from the string's own storage (a small string's, on the stack):
    /// `+= text.utf8` walks the view generically, about 170 instructions a piece.
    private mutating func appendText(_ text: String) {
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { bytes.append(contentsOf: $0) }
        if copied == nil { bytes += text.utf8 }
    }

    /// CR LF, appended byte by byte: cheaper than a copy of two.
    private mutating func end() {
        bytes.append(13)
        bytes.append(10)
    }
}
