import ReceptionistWire
import Testing

@Suite struct SubscriptionNarrowingTests {
    private func options(models: [String]? = nil, paths: [String]? = nil, maxRate: Double? = nil) -> SubscriptionOptions {
        SubscriptionOptions(models: models, paths: paths?.map { $0.split(separator: ".").map(String.init) }, maxRate: maxRate)
    }

    @Test func whatIsNotListedIsNotNarrowed() {
        let asked = options(models: ["a"], paths: ["color"], maxRate: 5)
        #expect(asked.narrowed(to: .none) == asked)
    }

    @Test func anUnfilteredSubscriptionGetsWhatIsAllowed() {
        #expect(SubscriptionOptions.none.narrowed(to: options(paths: ["color"])) == options(paths: ["color"]))
        #expect(SubscriptionOptions.none.narrowed(to: options(models: ["tile-*"])) == options(models: ["tile-*"]))
    }

    @Test func theNarrowerOfTwoOverlappingEntriesIsKept() {
        #expect(options(paths: ["style", "label"]).narrowed(to: options(paths: ["style.color"])) == options(paths: ["style.color"]))
        #expect(options(paths: ["style.color.r"]).narrowed(to: options(paths: ["style"])) == options(paths: ["style.color.r"]))
        #expect(options(models: ["orders.*"]).narrowed(to: options(models: ["orders.eu", "users"])) == options(models: ["orders.eu"]))
        #expect(options(models: ["orders.eu", "orders.us"]).narrowed(to: options(models: ["orders.*"]))
            == options(models: ["orders.eu", "orders.us"]))
        #expect(options(models: ["a*"]).narrowed(to: options(models: ["ab*"])) == options(models: ["ab*"]))
    }

    /// A pattern asked for is kept only when an allowed one matches everything it does: `a*`
    /// (every id starting with `a`) is not within `a**` (every id starting with `a*`).
    @Test func anAskedPatternWiderThanTheAllowedOneIsNarrowedToIt() {
        #expect(options(models: ["a*"]).narrowed(to: options(models: ["a**"])) == options(models: ["a**"]))
        #expect(options(models: ["a**"]).narrowed(to: options(models: ["a*"])) == options(models: ["a**"]))
        #expect(options(models: ["a*x"]).narrowed(to: options(models: ["a*"])) == options(models: ["a*x"]))
        // Prefixes are bytes, as the filter matches them: `e` is not a prefix of `e\u{301}`.
        #expect(options(models: ["e\u{301}*"]).narrowed(to: options(models: ["e*"])) == options(models: ["e\u{301}*"]))
    }

    @Test func rateAndOldValuesStayAsAsked() {
        let asked = SubscriptionOptions(models: ["a", "b"], maxRate: 2, old: true)
        #expect(asked.narrowed(to: options(models: ["b"])) == SubscriptionOptions(models: ["b"], maxRate: 2, old: true))
    }

    @Test func nothingLeftIsNil() {
        #expect(options(models: ["a"]).narrowed(to: options(models: ["b"])) == nil)
        #expect(options(paths: ["label"]).narrowed(to: options(paths: ["color"])) == nil)
        #expect(options(paths: ["color.r"]).narrowed(to: options(paths: ["color.g"])) == nil)
    }
}
