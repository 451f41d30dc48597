import ReceptionistModel

/// Settings for groups of topic and store names (`namespaces` in the config file, `docs/HOOKS.md`):
/// each namespace has a name pattern (`orders.*`, or `*`) and settings that differ from the
/// gateway's. The first namespace whose pattern matches a name applies to it; a setting a
/// namespace leaves out is the gateway's. Pure and immutable; any thread.
public struct Namespaces: Sendable {
    public struct Namespace: Sendable, Equatable {
        /// A name (`chat`), a prefix ending in `*` (`orders.*`), or `*` for every name.
        public var pattern: String
        /// Change sets a store keeps, and messages a topic keeps, for resuming (at most `--history`).
        public var history: Int?
        /// Change sets a store keeps on disk (`--data-dir`), for reads of the past and resumes.
        public var retain: Int?
        /// Whether subscribers may follow presence here.
        public var presence: Bool?
        /// Whether clients without an API key may publish here (over WebSocket, or HTTP with a token).
        public var clientPublish: Bool?
        /// The hooks called for names here, of those set: subscribe, publish and write. Nil: all.
        public var hooks: Set<HookKind>?
        /// The most frames a second a store subscription here gets: one asking for more, or for
        /// every change set, gets this rate.
        public var maxRate: Double?

        public init(
            pattern: String, history: Int? = nil, presence: Bool? = nil, clientPublish: Bool? = nil, hooks: Set<HookKind>? = nil,
            maxRate: Double? = nil
        ) {
            self.pattern = pattern
            self.history = history
            self.presence = presence
            self.clientPublish = clientPublish
            self.hooks = hooks
            self.maxRate = maxRate
        }

        public func matches(_ name: String) -> Bool {
            pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : name == pattern
        }

        /// Why `pattern` can match no name, or nil: it must be a topic or store name, a prefix of
        /// one ending in `*` (no other `*`), or `*` alone. A pattern that matches nothing would
        /// leave its settings unapplied in silence (`*.orders`, `a b`).
        public static func problem(with pattern: String) -> String? {
            guard pattern != "*" else { return nil }
            let literal = pattern.hasSuffix("*") ? String(pattern.dropLast()) : pattern
            // A prefix must begin some name: the name itself, or one a character longer.
            let fits = pattern.hasSuffix("*")
                ? StoreRegistry.isValidName(literal) || StoreRegistry.isValidName(literal + "x") : StoreRegistry.isValidName(literal)
            return fits ? nil : "'\(pattern)' matches no name: use a name (1 to 64 of A-Z a-z 0-9 _ . -), a prefix of one ending in *, or *"
        }

        /// Whether every name `other` matches, this matches too: `other` after this never applies.
        public func covers(_ other: Namespace) -> Bool {
            guard pattern.hasSuffix("*") else { return other.pattern == pattern }
            return other.pattern.hasPrefix(pattern.dropLast())
        }
    }

    public var list: [Namespace]

    public init(_ list: [Namespace] = []) {
        self.list = list
    }

    /// The namespace `name` belongs to, if any.
    public func namespace(of name: String) -> Namespace? {
        list.isEmpty ? nil : list.first { $0.matches(name) }
    }

    public func history(of name: String, default limit: Int) -> Int {
        namespace(of: name)?.history ?? limit
    }

    public func retain(of name: String, default limit: Int) -> Int {
        namespace(of: name)?.retain ?? limit
    }

    public func allowsPresence(of name: String) -> Bool {
        namespace(of: name)?.presence ?? true
    }

    public func allowsClientPublish(to name: String) -> Bool {
        namespace(of: name)?.clientPublish ?? true
    }

    public func calls(_ hook: HookKind, for name: String) -> Bool {
        namespace(of: name)?.hooks?.contains(hook) ?? true
    }

    public func maxRate(of name: String) -> Double? {
        namespace(of: name)?.maxRate
    }
}
