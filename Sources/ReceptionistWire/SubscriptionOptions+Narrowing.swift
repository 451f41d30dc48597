/// A subscription narrowed to what the application allows (the subscribe hook's `models` and
/// `paths`): authorization by projection. Pure.
extension SubscriptionOptions {
    /// These options, their models and paths cut down to what `allowed` lists, or nil if nothing
    /// is left. A list `allowed` does not give leaves that part as asked; rate and old values
    /// stay as asked.
    ///
    /// Model ids ending in `*` are prefixes, and a key path covers every path under it, so where
    /// one entry covers the other the narrower is kept: asking `orders.*` where `orders.eu` is
    /// allowed gets `orders.eu`, and asking `style` where `style.color` is allowed gets
    /// `style.color`.
    public func narrowed(to allowed: SubscriptionOptions) -> SubscriptionOptions? {
        var models = self.models
        if let limit = allowed.models {
            models = Self.intersect(self.models ?? ["*"], limit, covers: Self.modelCovers)
            if models!.isEmpty { return nil }
        }
        var paths = self.paths
        if let limit = allowed.paths {
            paths = Self.intersect(self.paths ?? [[]], limit) { wide, narrow in narrow.starts(with: wide) }
            if paths!.isEmpty { return nil }
        }
        return SubscriptionOptions(models: models, paths: paths, maxRate: maxRate, old: old)
    }

    /// Every entry of `asked` that an allowed entry covers, and every allowed entry that an
    /// asked one covers.
    private static func intersect<T: Equatable>(_ asked: [T], _ allowed: [T], covers: (T, T) -> Bool) -> [T] {
        var kept: [T] = []
        for entry in asked {
            if allowed.contains(where: { covers($0, entry) }) {
                kept.append(entry)
            } else {
                kept += allowed.filter { covers(entry, $0) }
            }
        }
        return kept
    }

    /// Whether the model pattern `wide` matches everything `narrow` does: by bytes, as the filter
    /// matches (`ChangeFilter`). A pattern `narrow` is covered only if its own prefix starts with
    /// `wide`'s: `a*` is not within `a**`.
    private static func modelCovers(_ wide: String, _ narrow: String) -> Bool {
        guard wide.hasSuffix("*") else { return wide == narrow }
        let prefix = wide.utf8.dropLast()
        let matched = narrow.hasSuffix("*") ? narrow.utf8.dropLast() : narrow.utf8[...]
        return matched.starts(with: prefix)
    }
}
