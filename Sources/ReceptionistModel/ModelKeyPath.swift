/// A dotted path into a model's JSON tree, such as `style.border.width`. Empty means the whole model.
///
/// A path of one key, what jobs set most (`color`), is held as that key's string, not as an
/// array: an array is a heap object, so every copy of a change or an operation retained and
/// released it atomically, four times for each change a job set. A key of up to 15 bytes is a
/// string with no heap object at all.
///
/// Invariant: a path of exactly one component is always `.one`, any other `.many`; every
/// initialiser goes through `init(_:)`. So the synthesised `==` and `hash` compare components.
/// Checked by `ModelKeyPathTests.oneKeyIsOneFormHoweverMade`.
public struct ModelKeyPath: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    private enum Storage: Sendable, Hashable {
        case one(String)
        case many([String])
    }

    private let storage: Storage

    public init(_ components: [String]) {
        storage = components.count == 1 ? .one(components[0]) : .many(components)
    }

    /// Parses `a.b.c`; an empty string is the whole model. Empty components are refused. Split
    /// at every `.` byte, as clients split it: as a `String`, a `.` that a combining mark follows
    /// is one character, and was kept inside a member name.
    public init?(parsing text: String) {
        if text.isEmpty {
            self.init([])
            return
        }
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard !parts.contains(where: \.isEmpty) else { return nil }
        self.init(parts)
    }

    public init(stringLiteral value: String) {
        self = ModelKeyPath(parsing: value) ?? ModelKeyPath([value])
    }

    public static let whole = ModelKeyPath([])

    /// The keys from the model down. A path of one key builds its array here: code on the commit
    /// path reads `count` and `withComponents` instead.
    public var components: [String] {
        switch storage {
        case .one(let key): [key]
        case .many(let keys): keys
        }
    }

    /// How many keys deep the path is; 0 for the whole model.
    public var count: Int {
        switch storage {
        case .one: 1
        case .many(let keys): keys.count
        }
    }

    /// Runs `body` on the keys where they are, building nothing.
    public func withComponents<Result>(_ body: (UnsafeBufferPointer<String>) throws -> Result) rethrows -> Result {
        switch storage {
        case .one(let key): try withUnsafePointer(to: key) { try body(UnsafeBufferPointer(start: $0, count: 1)) }
        case .many(let keys): try keys.withUnsafeBufferPointer(body)
        }
    }

    /// The length of `description` in UTF-8, without making it.
    public var utf8Count: Int {
        switch storage {
        case .one(let key): key.utf8.count
        case .many(let keys): keys.reduce(keys.count - 1) { $0 + $1.utf8.count }
        }
    }

    public var description: String {
        switch storage {
        case .one(let key): key
        case .many(let keys): keys.joined(separator: ".")
        }
    }

    /// Whether `self` is `other` or one of its ancestors.
    public func isPrefix(of other: ModelKeyPath) -> Bool {
        switch (storage, other.storage) {
        case (.one(let key), .one(let otherKey)): key == otherKey
        case (.one(let key), .many(let otherKeys)): otherKeys.first == key
        case (.many(let keys), .one(let otherKey)): keys.isEmpty || (keys.count == 1 && keys[0] == otherKey)
        case (.many(let keys), .many(let otherKeys)):
            keys.count <= otherKeys.count && zip(keys, otherKeys).allSatisfy { $0 == $1 }
        }
    }

    /// Whether a change at one path can affect the value at the other.
    public func isRelated(to other: ModelKeyPath) -> Bool {
        isPrefix(of: other) || other.isPrefix(of: self)
    }
}
