/// A dotted path into a model's JSON tree, such as `style.border.width`. Empty means the whole model.
public struct ModelKeyPath: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let components: [String]

    public init(_ components: [String]) {
        self.components = components
    }

    /// Parses `a.b.c`; an empty string is the whole model. Empty components are refused.
    public init?(parsing text: String) {
        if text.isEmpty {
            components = []
            return
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !parts.contains(where: \.isEmpty) else { return nil }
        components = parts
    }

    public init(stringLiteral value: String) {
        self = ModelKeyPath(parsing: value) ?? ModelKeyPath([value])
    }

    public static let whole = ModelKeyPath([])

    public var description: String { components.joined(separator: ".") }

    /// Whether `self` is `other` or one of its ancestors.
    public func isPrefix(of other: ModelKeyPath) -> Bool {
        components.count <= other.components.count && zip(components, other.components).allSatisfy { $0 == $1 }
    }

    /// Whether a change at one path can affect the value at the other.
    public func isRelated(to other: ModelKeyPath) -> Bool {
        isPrefix(of: other) || other.isPrefix(of: self)
    }
}
