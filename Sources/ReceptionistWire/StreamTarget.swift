/// What a subscription follows: a model store or a topic, by name.
public enum StreamTarget: Sendable, Hashable, CustomStringConvertible {
    case store(String)
    case topic(String)

    public var name: String {
        switch self {
        case .store(let name), .topic(let name): name
        }
    }

    public var description: String {
        switch self {
        case .store(let name): "store '\(name)'"
        case .topic(let name): "topic '\(name)'"
        }
    }
}
