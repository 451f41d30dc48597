/// What a `ScriptBatcher` gathers: writes to one Redis server for one script call, bounded so
/// that one call never holds Redis for long. A batch always takes its first item.
protocol ScriptBatch {
    associatedtype Item
    /// What waits for an item's answer: its completion, in a struct of the batch's own so that the
    /// batcher, generic over the batch, holds it as it is (a bare closure held as a generic value
    /// is wrapped in a conversion thunk, an allocation and a call more for every item).
    associatedtype Waiter
    init()
    /// The most items a batch takes (a bound in bytes may end it sooner).
    static var capacity: Int { get }
    var isEmpty: Bool { get }
    /// Whether no more items fit.
    var isFull: Bool { get }
    /// Whether `item` fits.
    func fits(_ item: Item) -> Bool
    mutating func append(_ item: Item)
}
