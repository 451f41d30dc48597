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
        bytes += text.utf8
        end()
    }

    /// One argument of texts end to end (a key's prefix, a name and a suffix, say), written as
    /// they are, never joined into a `String` first.
    public mutating func append(_ first: String, _ second: String, _ third: String = "") {
        header(first.utf8.count + second.utf8.count + third.utf8.count)
        bytes += first.utf8
        bytes += second.utf8
        bytes += third.utf8
        end()
    }

    /// A number, as its decimal digits.
    public mutating func append(_ value: UInt64) {
        header(JSONWriter.decimalCount(value))
        JSONWriter.writeDecimal(value, to: &bytes)
        end()
    }

    /// A count or a bound; never negative.
    public mutating func append(_ value: Int) {
        precondition(value >= 0, "a Redis argument count or bound is never negative")
        append(UInt64(value))
    }

    /// The whole command: the array's header, `words` (the command's name, say), then these
    /// arguments.
    public func command(_ words: String...) -> [UInt8] {
        var head = RedisArguments(capacity: 16 + words.reduce(0) { $0 + $1.utf8.count + 16 })
        for word in words { head.append(word) }
        var out: [UInt8] = []
        out.reserveCapacity(16 + head.bytes.count + bytes.count)
        out.append(UInt8(ascii: "*"))
        JSONWriter.writeDecimal(UInt64(head.count + count), to: &out)
        out.append(13)
        out.append(10)
        out += head.bytes
        out += bytes
        return out
    }

    private mutating func header(_ length: Int) {
        count += 1
        bytes.append(UInt8(ascii: "$"))
        JSONWriter.writeDecimal(UInt64(length), to: &bytes)
        end()
    }

    /// CR LF.
    private mutating func end() {
        bytes.append(13)
        bytes.append(10)
    }
}
