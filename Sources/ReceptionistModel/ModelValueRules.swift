import ReceptionistJSON

/// What a model may hold, checked before a write is applied: every member name non-empty and free
/// of `.`, and nesting no deeper than the parser takes (`JSONParser.maxDepth`), counting a `set`'s
/// key path.
///
/// A change names the member it changed by a dotted key path (`"style.color"`), so a member named
/// `"a.b"`, or `""`, would reach subscribers as a path they cannot tell from another; and a model
/// deeper than the parser takes could be stored but never read back (a durable engine's restart,
/// a cluster node's re-read). Both are refused with `invalidValue`.
///
/// Pure.
enum ModelValueRules {
    /// Why `value`, written `keyPathCount` members deep into a model, may not be, or nil.
    static func problem(in value: JSONValue, keyPathCount: Int = 0) -> String? {
        guard keyPathCount + depth(of: value, limit: JSONParser.maxDepth - keyPathCount) <= JSONParser.maxDepth else {
            return tooDeep
        }
        return badName(in: value).map(because)
    }

    private static let tooDeep = "a model may nest at most \(JSONParser.maxDepth) levels deep, its key path included"

    private static func isBad(_ name: String) -> Bool {
        name.isEmpty || name.utf8.contains(UInt8(ascii: "."))
    }

    private static func because(_ name: String) -> String {
        name.isEmpty
            ? "a member name may not be empty: a change's key path could not name it"
            : "the member name '\(name)' holds a '.', which separates a change's key path"
    }

    /// Why a `set` of `value` (nil: a removal) `keyPathCount` members deep may not be, or nil. A
    /// key path parsed from text holds no empty or dotted name (`ModelKeyPath(parsing:)`), so only
    /// the value's names are looked at; a scalar, what jobs set most, costs a comparison.
    static func problem(setting value: JSONValue?, keyPathCount: Int) -> String? {
        switch value {
        case .object?, .array?: return problem(in: value!, keyPathCount: keyPathCount)
        case nil: return nil
        default: return keyPathCount < JSONParser.maxDepth ? nil : tooDeep
        }
    }

    /// The levels of objects and arrays in `value` (a scalar: 1), counted up to just past `limit`.
    static func depth(of value: JSONValue, limit: Int) -> Int {
        guard limit > 0 else { return 1 }
        switch value {
        case .object(let members):
            return 1 + (members.values.lazy.map { depth(of: $0, limit: limit - 1) }.max() ?? 0)
        case .array(let items):
            return 1 + (items.lazy.map { depth(of: $0, limit: limit - 1) }.max() ?? 0)
        default:
            return 1
        }
    }

    /// The first member name, at any depth, that is empty or holds a `.`.
    private static func badName(in value: JSONValue) -> String? {
        switch value {
        case .object(let members):
            for (name, member) in members {
                if isBad(name) { return name }
                if let bad = badName(in: member) { return bad }
            }
            return nil
        case .array(let items):
            for item in items {
                if let bad = badName(in: item) { return bad }
            }
            return nil
        default:
            return nil
        }
    }
}
