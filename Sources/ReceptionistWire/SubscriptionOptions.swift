import ReceptionistJSON

/// What a store subscription asked for beyond the store: which models, which key paths inside
/// them, at most how many frames a second, and whether with old values (`docs/PROTOCOL.md`,
/// "Subscription options"). A pure value, decoded from a `subscribe` message or a query string.
///
/// Invariant: two subscriptions that asked for the same thing have equal options, whatever the
/// order or repetition of their lists (the lists are sorted and deduplicated), since subscriptions
/// with equal options share one receptionist and one encoding of each frame.
public struct SubscriptionOptions: Sendable, Hashable {
    /// Model ids; one ending in `*` is a prefix. Nil: every model.
    public private(set) var models: [String]?
    /// Key-path prefixes, as their components. Nil: every path.
    public private(set) var paths: [[String]]?
    /// The most frames a second. Nil: every change set as it commits.
    public private(set) var maxRate: Double?
    /// Whether each change carries its previous value.
    public private(set) var old: Bool

    public static let none = SubscriptionOptions()

    /// The most entries a list may hold, and the fastest rate one may ask for.
    public static let maxModels = 1024
    public static let maxPaths = 64
    public static let maxRateLimit = 1000.0
    /// The slowest rate: one frame in 100 s. A slower one would hold changes (and a timer) for
    /// longer than any client waits.
    public static let minRate = 0.01

    public init(models: [String]? = nil, paths: [[String]]? = nil, maxRate: Double? = nil, old: Bool = false) {
        self.models = models.map { Self.distinct($0, bytes: { Array($0.utf8) }) }
        self.paths = paths.map { Self.distinct($0, bytes: { Array($0.joined(separator: ".").utf8) }) }
        self.maxRate = maxRate
        self.old = old
    }

    /// `items` without repeats, in the order of their bytes. A model prefix and a key path match
    /// by bytes, so two written differently are two options, though Swift's `String` takes two
    /// canonically equivalent ones (`é` as one code point or two) for one.
    private static func distinct<T>(_ items: [T], bytes: (T) -> [UInt8]) -> [T] {
        var seen = Set<[UInt8]>()
        return items.map { (bytes($0), $0) }.sorted { $0.0.lexicographicallyPrecedes($1.0) }.compactMap {
            seen.insert($0.0).inserted ? $0.1 : nil
        }
    }

    /// Equal when they ask for the same bytes: the options group subscribers that get the same
    /// frames (`StoreFeed`), and a filter matches by bytes.
    public static func == (a: SubscriptionOptions, b: SubscriptionOptions) -> Bool {
        a.maxRate == b.maxRate && a.old == b.old && bytesEqual(a.models, b.models, { [$0] })
            && bytesEqual(a.paths, b.paths, { $0 })
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(maxRate)
        hasher.combine(old)
        hasher.combine(models.map { $0.map { Array($0.utf8) } })
        hasher.combine(paths.map { $0.map { $0.map { Array($0.utf8) } } })
    }

    private static func bytesEqual<T>(_ a: [T]?, _ b: [T]?, _ parts: (T) -> [String]) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return a.count == b.count && zip(a, b).allSatisfy { x, y in
            let (x, y) = (parts(x), parts(y))
            return x.count == y.count && zip(x, y).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
        }
    }

    /// No option at all: today's stream of every change set, unfiltered.
    public var isNone: Bool { self == .none }

    public typealias Problem = ClientMessage.Problem

    /// The options among a `subscribe` message's members. Absent or null members are absent options.
    public static func decode(message value: JSONValue) -> Result<SubscriptionOptions, Problem> {
        func strings(_ field: String) -> Result<[String]?, Problem> {
            guard let raw = value[field], raw != .null else { return .success(nil) }
            guard case .array(let items) = raw else { return .failure(bad(field, "must be a list of strings")) }
            var result: [String] = []
            for item in items {
                guard let text = item.stringValue else { return .failure(bad(field, "must be a list of strings")) }
                result.append(text)
            }
            return .success(result)
        }
        let rate: Double?
        switch value["maxRate"] {
        case nil, .null?: rate = nil
        case .number(let number)?: rate = number.doubleValue
        default: return .failure(bad("maxRate", "must be a number of frames a second, 0.01 <= maxRate <= 1000"))
        }
        let old: Bool
        switch value["old"] {
        case nil, .null?: old = false
        case .bool(let flag)?: old = flag
        default: return .failure(bad("old", "must be true or false"))
        }
        return strings("models").flatMap { models in
            strings("paths").flatMap { paths in
                validated(models: models, paths: paths, maxRate: rate, old: old)
            }
        }
    }

    /// The options in a query string's parameters (`models`, `paths`, `maxRate`, `old`), where
    /// `values(name)` gives every value of one parameter as it came, and `decoding` undoes its
    /// escapes (percent-decoding). Lists are comma-separated, or the parameter repeated; a list is
    /// split on its commas before each item is decoded, so an escaped comma (`%2C`) stays in its
    /// model id or member name.
    public static func decode(
        query values: (String) -> [String], decoding: (Substring) -> String = { String($0) }
    ) -> Result<SubscriptionOptions, Problem> {
        func list(_ name: String) -> [String]? {
            let raw = values(name)
            guard !raw.isEmpty else { return nil }
            return raw.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false).map(decoding) }
        }
        var rate: Double?
        if let text = values("maxRate").last.map({ decoding(Substring($0)) }) {
            // Decimal only: `Double` would also read hexadecimal and "nan".
            let decimal = !text.isEmpty && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: ".") }
            guard decimal, let number = Double(text) else {
                return .failure(bad("maxRate", "must be a number of frames a second, 0.01 <= maxRate <= 1000"))
            }
            rate = number
        }
        let oldText = values("old").last.map({ decoding(Substring($0)) })
        guard let old = QueryFlag.value(oldText) else {
            return .failure(bad("old", "must be true or false (or 1 or 0), not '\(oldText ?? "")'"))
        }
        return validated(models: list("models"), paths: list("paths"), maxRate: rate, old: old)
    }

    private static func validated(models: [String]?, paths: [String]?, maxRate: Double?, old: Bool)
        -> Result<SubscriptionOptions, Problem>
    {
        if let models {
            guard !models.isEmpty else { return .failure(bad("models", "must list at least one model id")) }
            guard models.count <= maxModels else { return .failure(bad("models", "may list at most \(maxModels) ids")) }
            guard !models.contains(where: \.isEmpty) else { return .failure(bad("models", "may not hold an empty id")) }
        }
        var components: [[String]]?
        if let paths {
            guard !paths.isEmpty else { return .failure(bad("paths", "must list at least one key path")) }
            guard paths.count <= maxPaths else { return .failure(bad("paths", "may list at most \(maxPaths) key paths")) }
            var parsed: [[String]] = []
            for path in paths {
                // At every `.` byte, as a change's path is split (`ModelKeyPath`).
                let parts = path.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
                guard !parts.contains(where: \.isEmpty) else {
                    return .failure(bad("paths", "'\(path)' has an empty segment; use dotted names such as style.border"))
                }
                parsed.append(parts)
            }
            components = parsed
        }
        if let maxRate {
            guard maxRate.isFinite, maxRate >= minRate, maxRate <= maxRateLimit else {
                return .failure(bad("maxRate", "must be a number of frames a second, 0.01 <= maxRate <= 1000"))
            }
        }
        return .success(SubscriptionOptions(models: models, paths: components, maxRate: maxRate, old: old))
    }

    private static func bad(_ field: String, _ detail: String) -> Problem {
        Problem(.badMessage, "\"\(field)\" \(detail)")
    }
}
