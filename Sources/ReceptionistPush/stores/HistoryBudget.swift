/// The bytes of encoded change sets that the groups of one store keep for resumes, all together:
/// one `--history-bytes` a store, not one a set of options (256 sets held 256 times the limit).
/// What the groups keep is a cache of events already sent; a resume past it encodes them again
/// from the store's own history, so dropping from it loses nothing.
///
/// The loop's thread only.
final class HistoryBudget {
    let limit: Int
    private(set) var used = 0

    init(limit: Int) { self.limit = limit }

    /// `bytes` more kept (fewer, when negative).
    func charge(_ bytes: Int) { used += bytes }

    var isSpent: Bool { used > limit }
}
