/// Which values an observer wants in each change, as with key-value observing.
public struct ObservationOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let old = ObservationOptions(rawValue: 1)
    public static let new = ObservationOptions(rawValue: 2)
    public static let both: ObservationOptions = [.old, .new]
}
