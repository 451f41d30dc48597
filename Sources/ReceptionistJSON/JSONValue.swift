import OrderedCollections

/// A JSON object's members, in the order they were written.
public typealias JSONObject = OrderedDictionary<String, JSONValue>

/// A JSON value (RFC 8259): the type of every model property.
///
/// A value keeps what its writer meant: numbers their literal text (`JSONNumber`), objects their
/// member order. Encoding writes it back as it came, less whitespace, so a value read and written
/// again is the same text, and equal values encode equally.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// Equal when they are the same text: strings and member names by their bytes (Swift's
    /// `String` takes two canonically equivalent strings, `é` as one code point or two, for one),
    /// so a change from one to the other is a change, and equal values encode equally. The hash,
    /// by `String`'s, is the same for byte-equal strings, as it must be.
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.number(let x), .number(let y)): return x == y
        case (.string(let x), .string(let y)): return sameBytes(x, y)
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(==)
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { sameBytes($0.key, $1.key) && $0.value == $1.value }
        default: return false
        }
    }

    private static func sameBytes(_ x: String, _ y: String) -> Bool {
        var x = x, y = y
        return x.withUTF8 { x in y.withUTF8 { y in x.count == y.count && x.elementsEqual(y) } }
    }

    public var objectValue: JSONObject? {
        if case .object(let members) = self { return members }
        return nil
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The number's nearest `Double`, for values the gateway computes with (rates, times).
    public var numberValue: Double? {
        if case .number(let number) = self { return number.doubleValue }
        return nil
    }

    /// The number as an unsigned integer, when its literal is one (a version, a time in µs).
    public var uint64Value: UInt64? {
        if case .number(let number) = self { return number.uint64Value }
        return nil
    }

    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// An object of `members` written in key order, for tables without an order of their own
    /// (a store's models by id).
    public static func sortedObject(_ members: [String: JSONValue]) -> JSONValue {
        .object(JSONObject(uniqueKeysWithValues: members.sorted { $0.key < $1.key }))
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

    /// Sets (or with nil removes) the value at `path`, creating intermediate objects. A member
    /// that exists keeps its place; a new one is added at the end.
    ///
    /// A step through a non-object replaces it with an object. The payload is taken out of `self`
    /// before it is changed so the members stay uniquely referenced and are edited in place.
    public mutating func setValue(_ value: JSONValue?, at path: ArraySlice<String>) {
        _ = replaceValue(value, at: path)
    }

    /// `setValue`, returning the value that was at `path` before: one walk down the tree instead
    /// of a read and then a write (a commit does this for every change).
    public mutating func replaceValue(_ value: JSONValue?, at path: ArraySlice<String>) -> JSONValue? {
        path.withUnsafeBufferPointer { replaceValue(value, along: $0) }
    }

    /// `replaceValue` along a whole path. The walk reads the path's keys in place: a slice of it,
    /// at each step, retained and released the array (atomically) for every change a job sets.
    public mutating func replaceValue(_ value: JSONValue?, at path: [String]) -> JSONValue? {
        path.withUnsafeBufferPointer { replaceValue(value, along: $0) }
    }

    /// `replaceValue` along keys read where they are, for a caller that holds them in place.
    public mutating func replaceValue(_ value: JSONValue?, along path: UnsafeBufferPointer<String>) -> JSONValue? {
        // The key is read where it is used, `path[0]`, never bound: a binding copies it (a
        // retain and a release for every change a job sets).
        guard !path.isEmpty else {
            let old = self
            self = value ?? .null
            return old
        }
        var members: JSONObject
        var wasObject = false
        if case .object(let existing) = self {
            members = existing
            wasObject = true
            self = .null
        } else if value == nil {
            // Removing beneath a value that is not an object: there is nothing there to remove.
            return nil
        } else {
            members = [:]
        }
        let old: JSONValue?
        if path.count == 1 {
            if value != nil, let index = members.index(forKey: path[0]) {
                // Swapped in place: `updateValue` copies the old value out and then releases
                // the member it leaves, a second retain and release for every change a job sets.
                // (Unwrapped once, not bound and then copied: a binding is a copy of its own.)
                var replaced = value.unsafelyUnwrapped
                swap(&replaced, &members.values[index])
                old = replaced
            } else if let value {
                members[path[0]] = value
                old = nil
            } else {
                old = members.removeValue(forKey: path[0])
            }
        } else if let index = members.index(forKey: path[0]) {
            old = members.values[index].replaceValue(value, along: UnsafeBufferPointer(rebasing: path.dropFirst()))
        } else if value != nil {
            var child = JSONValue.object([:])
            _ = child.replaceValue(value, along: UnsafeBufferPointer(rebasing: path.dropFirst()))
            members[path[0]] = child
            old = nil
        } else {
            old = nil
        }
        self = .object(members)
        return wasObject ? old : nil
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    public init(floatLiteral value: Double) { self = .number(JSONNumber(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Members in the order written; a repeated key keeps its first place and its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var members = JSONObject()
        for (key, value) in elements { members[key] = value }
        self = .object(members)
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// About how many bytes the value takes as JSON text (a string's UTF-8 without its escapes, a
    /// number's literal, and one byte for each quote, comma and bracket): for weighing what a
    /// history keeps, not for laying it out. Walks every node.
    public var approximateBytes: Int {
        switch self {
        case .null, .bool: return 5
        case .number(let number): return number.approximateBytes
        case .string(let text): return text.utf8.count + 2
        case .array(let items):
            var total = 2
            for item in items { total += item.approximateBytes + 1 }
            return total
        case .object(let members):
            var total = 2
            for (name, value) in members { total += name.utf8.count + 4 + value.approximateBytes }
            return total
        }
    }
}
