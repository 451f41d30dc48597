import ReceptionistGateway
import ReceptionistWire
import Yams

/// The `namespaces` of a config file: a list of name patterns, each with the settings that differ
/// for the topics and stores it matches.
///
/// ```yaml
/// namespaces:
///   - pattern: "orders.*"
///     history: 100          # change sets or messages kept for resuming (at most --history)
///     retain: 5000          # change sets a store keeps on disk (--data-dir), for reads of the past
///     presence: false       # no presence here
///     clientPublish: false  # only API-key holders publish here
///     hooks: [subscribe]    # of the hooks set, only these are called for names here
///     maxRate: 2            # store subscriptions here get at most 2 frames a second
/// ```
enum NamespaceFile {
    static let keys: Set<String> = ["pattern", "history", "retain", "presence", "clientPublish", "hooks", "maxRate"]
    static let hooks: [String: HookKind] = ["subscribe": .subscribe, "publish": .publish, "write": .write]

    static func parse(_ node: Node, line: Int) throws -> Namespaces {
        guard let items = node.sequence else {
            throw ConfigFile.Problem(line: line, key: "namespaces", detail: "must be a list of {pattern: …, …}")
        }
        var list: [Namespaces.Namespace] = []
        for item in items {
            let namespace = try namespace(item)
            // A pattern an earlier one covers would never apply: its settings would be ignored.
            if let earlier = list.first(where: { $0.covers(namespace) }) {
                throw ConfigFile.Problem(
                    line: item.mark?.line ?? line, key: "namespaces.pattern",
                    detail: "'\(namespace.pattern)' never applies: the namespace '\(earlier.pattern)' before it covers every name it does")
            }
            list.append(namespace)
        }
        return Namespaces(list)
    }

    private static func namespace(_ node: Node) throws -> Namespaces.Namespace {
        let start = node.mark?.line ?? 0
        guard let mapping = node.mapping else {
            throw ConfigFile.Problem(line: start, key: "namespaces", detail: "must list mappings such as {pattern: \"orders.*\"}")
        }
        var found: [String: (Node, Int)] = [:]
        for (keyNode, value) in mapping {
            let key = keyNode.string ?? ""
            let line = keyNode.mark?.line ?? start
            guard keys.contains(key) else {
                throw ConfigFile.Problem(line: line, key: "namespaces.\(key)", detail: "is not a namespace setting (\(keys.sorted().joined(separator: ", ")))")
            }
            guard found[key] == nil else { throw ConfigFile.Problem(line: line, key: "namespaces.\(key)", detail: "is given twice") }
            found[key] = (value, line)
        }
        func bad(_ key: String, _ detail: String) -> ConfigFile.Problem {
            ConfigFile.Problem(line: found[key]?.1 ?? start, key: "namespaces.\(key)", detail: detail)
        }
        guard let pattern = found["pattern"]?.0.string, !pattern.isEmpty else { throw bad("pattern", "is required: a name, a prefix ending in *, or *") }
        if let problem = Namespaces.Namespace.problem(with: pattern) { throw bad("pattern", problem) }
        var namespace = Namespaces.Namespace(pattern: pattern)
        if let (value, _) = found["history"] {
            guard let history = value.int, history >= 1 else { throw bad("history", "must be a whole number at least 1") }
            namespace.history = history
        }
        if let (value, _) = found["retain"] {
            guard let retain = value.int, retain >= 1 else { throw bad("retain", "must be a whole number at least 1") }
            namespace.retain = retain
        }
        if let (value, _) = found["presence"] {
            guard let on = value.bool else { throw bad("presence", "must be true or false") }
            namespace.presence = on
        }
        if let (value, _) = found["clientPublish"] {
            guard let on = value.bool else { throw bad("clientPublish", "must be true or false") }
            namespace.clientPublish = on
        }
        if let (value, _) = found["hooks"] {
            guard let names = value.sequence?.map({ $0.string ?? "" }) else { throw bad("hooks", "must be a list of subscribe, publish, write") }
            var kinds = Set<HookKind>()
            for name in names {
                guard let kind = hooks[name] else { throw bad("hooks", "names '\(name)'; use subscribe, publish or write") }
                kinds.insert(kind)
            }
            namespace.hooks = kinds
        }
        if let (value, _) = found["maxRate"] {
            guard let rate = value.float, rate >= SubscriptionOptions.minRate, rate <= SubscriptionOptions.maxRateLimit else {
                throw bad("maxRate", "must be a number of frames a second, 0.01 to 1000")
            }
            namespace.maxRate = rate
        }
        return namespace
    }
}
