/// A JSON value (RFC 8259): the type of every model property.
///
/// Object keys are unordered; encoding writes them sorted so equal values encode equally.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var numberValue: Double? {
        if case .number(let number) = self { return number }
        return nil
    }

    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// The value at `path` (object members only), or nil if any step is missing.
    public func value(at path: some Collection<String>) -> JSONValue? {
        var current = self
        for key in path {
            guard case .object(let members) = current, let next = members[key] else { return nil }
            current = next
        }
        return current
    }

    /// Sets (or with nil removes) the value at `path`, creating intermediate objects.
    ///
    /// A step through a non-object replaces it with an object. The payload is taken out of `self`
    /// before it is changed so the dictionary stays uniquely referenced and is edited in place.
    public mutating func setValue(_ value: JSONValue?, at path: ArraySlice<String>) {
        guard let key = path.first else {
            self = value ?? .null
            return
        }
        var members: [String: JSONValue]
        if case .object(let existing) = self {
            members = existing
            self = .null
        } else {
            members = [:]
        }
        if path.count == 1 {
            members[key] = value
        } else if value != nil || members[key] != nil {
            var child = members.removeValue(forKey: key) ?? .object([:])
            child.setValue(value, at: path.dropFirst())
            members[key] = child
        }
        self = .object(members)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}
