/// An ordered list of header fields with case-insensitive lookup.
///
/// Names keep the case they arrived in; lookups compare ASCII case-insensitively.
public struct HTTPHeaders: Sendable, Hashable, Sequence {
    public private(set) var fields: [(name: String, value: String)]
    /// Where each `KnownHeader` first stands: its field's index plus one, 0 when absent, and
    /// `beyond` when past the first 254 fields (then found by a pass). Derived from `fields`.
    private var known = SIMD16<UInt8>()
    /// The known headers that more than one field names, a bit each.
    private var repeats: UInt16 = 0
    private static let beyond: UInt8 = 255

    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = []
        self.fields.reserveCapacity(fields.count)
        for field in fields { add(field.name, field.value) }
    }

    /// No fields yet, with room for `capacity` without growing.
    public init(capacity: Int) {
        fields = []
        fields.reserveCapacity(capacity)
    }

    public mutating func add(_ name: String, _ value: String) {
        add(name, value, known: KnownHeader.named(name))
    }

    /// Adds a field whose name the caller has told known or not already (`KnownHeader.named`).
    public mutating func add(_ name: String, _ value: String, known header: KnownHeader?) {
        fields.append((name, value))
        guard let header else { return }
        if known[header.rawValue] == 0 {
            known[header.rawValue] = fields.count < Int(Self.beyond) ? UInt8(fields.count) : Self.beyond
        } else {
            repeats |= 1 << header.rawValue
        }
    }

    /// Makes `value` the only value of `name`.
    public mutating func set(_ name: String, _ value: String) {
        let kept = fields.filter { !$0.name.asciiCaseInsensitiveEquals(name) }
        (fields, known, repeats) = ([], SIMD16<UInt8>(), 0)
        for field in kept { add(field.name, field.value) }
        add(name, value)
    }

    /// The first value of `name`, or nil.
    public subscript(name: String) -> String? {
        if let header = KnownHeader.named(name) { return self[header] }
        // Lengths first: most fields are told apart without comparing a byte.
        let length = name.utf8.count
        for field in fields where field.name.utf8.count == length && field.name.asciiCaseInsensitiveEquals(name) {
            return field.value
        }
        return nil
    }

    /// The first value of a known header, or nil: an index, not a pass.
    public subscript(header: KnownHeader) -> String? {
        switch known[header.rawValue] {
        case 0: return nil
        case Self.beyond: return fields.first(where: { $0.name.asciiCaseInsensitiveEquals(header.name) })?.value
        case let place: return fields[Int(place) - 1].value
        }
    }

    /// Whether more than one field names `header`.
    public func isRepeated(_ header: KnownHeader) -> Bool { repeats & (1 << header.rawValue) != 0 }

    /// The first of `headers` that more than one field names, or nil.
    public func repeated(among headers: [KnownHeader]) -> KnownHeader? {
        headers.first { repeats & (1 << $0.rawValue) != 0 }
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.asciiCaseInsensitiveEquals(name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }
}

extension String {
    /// ASCII case-insensitive comparison, enough for header names and tokens. Read in place: a
    /// zip of the two UTF-8 views ran their generic iterators byte by byte (1.5% of an HTTP
    /// publish, comparing every header's name with `Content-Length`).
    public func asciiCaseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        var a = self, b = other
        return a.withUTF8 { x in
            b.withUTF8 { y in
                for index in x.indices where x[index] != y[index] {
                    let lx = (x[index] >= 65 && x[index] <= 90) ? x[index] | 0x20 : x[index]
                    let ly = (y[index] >= 65 && y[index] <= 90) ? y[index] | 0x20 : y[index]
                    if lx != ly { return false }
                }
                return true
            }
        }
    }
}

extension HTTPHeaders {
    /// Whether `name` can be a header's name: a token of RFC 9110 §5.6.2.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { HTTPHeadScanner.isTokenByte($0) }
    }
}
