/// An ordered list of header fields with case-insensitive lookup.
///
/// Names keep the case they arrived in; lookups compare ASCII case-insensitively.
public struct HTTPHeaders: Sendable, Hashable, Sequence {
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    /// No fields yet, with room for `capacity` without growing.
    public init(capacity: Int) {
        fields = []
        fields.reserveCapacity(capacity)
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Makes `value` the only value of `name`.
    public mutating func set(_ name: String, _ value: String) {
        fields.removeAll { $0.name.asciiCaseInsensitiveEquals(name) }
        fields.append((name, value))
    }

    /// The first value of `name`, or nil.
    public subscript(name: String) -> String? {
        // Lengths first: most fields are told apart without comparing a byte.
        let length = name.utf8.count
        for field in fields where field.name.utf8.count == length && field.name.asciiCaseInsensitiveEquals(name) {
            return field.value
        }
        return nil
    }

    /// The first of `names` that more than one field names, or nil: one pass over the fields,
    /// lengths compared first.
    public func repeated(among names: [String]) -> String? {
        var seen = [Bool](repeating: false, count: names.count)
        for field in fields {
            let length = field.name.utf8.count
            for (index, name) in names.enumerated() where name.utf8.count == length && field.name.asciiCaseInsensitiveEquals(name) {
                if seen[index] { return name }
                seen[index] = true
            }
        }
        return nil
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
