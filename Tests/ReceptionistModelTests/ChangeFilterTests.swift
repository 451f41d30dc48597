import ReceptionistJSON
@testable import ReceptionistModel
import Testing

@Suite struct ChangeFilterTests {
    private func change(_ model: String, _ path: ModelKeyPath, _ old: JSONValue?, _ new: JSONValue?) -> ModelChange {
        ModelChange(model: model, keyPath: path, oldValue: old, newValue: new)
    }

    // MARK: Models

    @Test func exactModelsPassWholeAndOthersNot() {
        let filter = ChangeFilter(models: ["a", "c"], paths: nil)
        let changes = [
            change("a", "color", "red", "blue"), change("b", "color", "red", "blue"),
            change("c", .whole, nil, ["n": 1]), change("ab", "n", 1, 2), change("A", "n", 1, 2),
        ]
        #expect(filter.apply(changes) == [changes[0], changes[2]], "kept as they are, in order")
        #expect(filter.follows(model: "a") && filter.follows(model: "c"))
        #expect(!filter.follows(model: "b") && !filter.follows(model: "ab") && !filter.follows(model: ""))
        #expect(!filter.isAll)
    }

    @Test func aModelIdEndingInAStarIsAPrefix() {
        let filter = ChangeFilter(models: ["tile-1*", "other"], paths: nil)
        for id in ["tile-1", "tile-10", "tile-1x", "tile-1*", "other"] { #expect(filter.follows(model: id), "\(id)") }
        for id in ["tile-", "tile-2", "tile", "xtile-1", "other-1", "othe"] { #expect(!filter.follows(model: id), "\(id)") }
        let star = ChangeFilter(models: ["*"], paths: nil)
        #expect(star.follows(model: "anything") && star.follows(model: "x"))
        let prefixesOnly = ChangeFilter(models: ["a*", "b*"], paths: nil)
        #expect(prefixesOnly.follows(model: "a1") && prefixesOnly.follows(model: "b") && !prefixesOnly.follows(model: "c"))
        #expect(prefixesOnly.apply([change("c", "n", 1, 2), change("b2", "n", 1, 2)]) == [change("b2", "n", 1, 2)])
    }

    /// Prefixes are found by binary search: many of them, some covering others, and ids just
    /// beside each one, against a plain scan.
    @Test func manyPrefixesAgreeWithAScan() {
        var prefixes = (0..<500).map { "p\($0 * 7)-" }
        prefixes += ["p7", "q", "qq", "é", "éa", "z\u{0}"]
        let filter = ChangeFilter(models: prefixes.map { $0 + "*" }, paths: nil)
        var ids = prefixes.flatMap { [$0, $0 + "x", String($0.dropLast()), $0 + "\u{10FFFF}"] }
        ids += ["", "p", "p1", "p8-", "r", "e", "zz", "\u{1F600}"]
        for id in ids {
            let scan = prefixes.contains { id.utf8.starts(with: $0.utf8) }
            #expect(filter.follows(model: id) == scan, "\(id)")
        }
    }

    @Test func noModelsAndNoPathsIsEverything() {
        #expect(ChangeFilter.all.isAll)
        #expect(ChangeFilter(models: nil, paths: nil).isAll)
        #expect(ChangeFilter(models: nil, paths: [.whole]).isAll, "the whole model as a path is every path")
        #expect(ChangeFilter(models: nil, paths: ["color", .whole]).paths == nil)
        let changes = [change("a", .whole, nil, ["n": 1]), change("b", "x.y", 1, nil)]
        #expect(ChangeFilter.all.apply(changes) == changes)
        #expect(ChangeFilter(models: [], paths: nil).apply(changes) == [], "an empty list follows nothing")
    }

    // MARK: Paths

    @Test func aChangeAtOrUnderAListedPathPassesAsItIs() {
        let filter = ChangeFilter(models: nil, paths: ["color", "style.border"])
        let kept = [
            change("m", "color", "red", "blue"), change("m", "color.r", 1, 2), change("m", "style.border", nil, 1),
            change("m", "style.border.width", 1, nil),
        ]
        let dropped = [
            change("m", "size", 1, 2), change("m", "colorful", 1, 2), change("m", "col", 1, 2),
            change("m", "style.fill", 1, 2), change("m", "style.borders", 1, 2), change("m", "border", 1, 2),
        ]
        #expect(filter.apply(kept + dropped) == kept)
        #expect(filter.apply(dropped) == [])
    }

    @Test func aWholeModelReplacedIsCutDownToTheListedPaths() {
        let filter = ChangeFilter(models: nil, paths: ["color", "style.border"])
        let put = change(
            "m", .whole, ["color": "red", "size": 1, "style": ["border": 1, "fill": "x"]],
            ["color": "blue", "size": 2, "style": ["border": 2, "fill": "y"]])
        #expect(filter.apply([put]) == [change("m", "color", "red", "blue"), change("m", "style.border", 1, 2)])
    }

    @Test func unchangedPartsUnderAnAncestorChangeAreNotSent() {
        let filter = ChangeFilter(models: nil, paths: ["color", "style.border"])
        let sizeOnly = change(
            "m", .whole, ["color": "red", "size": 1, "style": ["border": 1]], ["size": 2, "color": "red", "style": ["border": 1, "fill": 3]])
        #expect(filter.apply([sizeOnly]) == [], "only what lies outside the listed paths changed")
        let colorOnly = change("m", .whole, ["color": "red", "style": ["border": 1]], ["color": "green", "style": ["border": 1]])
        #expect(filter.apply([colorOnly]) == [change("m", "color", "red", "green")])
        let absentBoth = change("m", .whole, ["size": 1], ["size": 2])
        #expect(filter.apply([absentBoth]) == [])
    }

    @Test func aParentObjectReplacedIsCutDown() {
        let filter = ChangeFilter(models: nil, paths: ["style.border"])
        // Replaced, with the listed part changed, unchanged, removed, added.
        #expect(filter.apply([change("m", "style", ["border": 1, "fill": "x"], ["border": 2])]) == [change("m", "style.border", 1, 2)])
        #expect(filter.apply([change("m", "style", ["border": 1, "fill": "x"], ["border": 1])]) == [])
        #expect(filter.apply([change("m", "style", ["border": 1, "fill": "x"], ["fill": "x"])]) == [change("m", "style.border", 1, nil)])
        #expect(filter.apply([change("m", "style", ["fill": "x"], ["fill": "x", "border": ["w": 3]])])
            == [change("m", "style.border", nil, ["w": 3])])
        // Removed, created, replaced by something that is not an object.
        #expect(filter.apply([change("m", "style", ["border": 1], nil)]) == [change("m", "style.border", 1, nil)])
        #expect(filter.apply([change("m", "style", nil, ["border": 5])]) == [change("m", "style.border", nil, 5)])
        #expect(filter.apply([change("m", "style", ["border": 1], 7)]) == [change("m", "style.border", 1, nil)])
        #expect(filter.apply([change("m", "style", 7, ["border": 1])]) == [change("m", "style.border", nil, 1)])
        #expect(filter.apply([change("m", "style", nil, ["fill": 1])]) == [], "nothing under the listed path before or after")
    }

    @Test func aCutDownChangeHasTheKindOfItsPart() {
        let filter = ChangeFilter(models: nil, paths: ["a.b"])
        let kept = filter.apply([
            change("m", "a", ["b": 1], ["b": 2]), change("m", "a", ["x": 1], ["b": 2]), change("m", "a", ["b": 1], ["x": 2]),
        ])
        #expect(kept.map(\.kind) == [.updated, .created, .deleted])
        #expect(kept.map(\.keyPath) == ["a.b", "a.b", "a.b"])
    }

    @Test func aPatchIsFilteredAndCutDown() throws {
        let store = ModelStore(name: "s")
        try store.commit([.put(model: "m", value: ["style": 5, "color": "red", "size": ["w": 1, "h": 2]])])
        // The patch replaces `style` (a number) by an object, so the store reports one change at
        // `style`, above the listed path.
        let patch = try store.commit([.patch(model: "m", patch: [
            "style": ["border": ["width": 1], "fill": 2], "color": "blue", "size": ["w": nil, "h": 3],
        ])])
        let filter = ChangeFilter(models: nil, paths: ["style.border.width", "size.w", "color"])
        #expect(filter.apply(patch.changes) == [
            change("m", "style.border.width", nil, 1), change("m", "color", "red", "blue"), change("m", "size.w", 1, nil),
        ])
        let styleOnly = ChangeFilter(models: nil, paths: ["style"])
        #expect(styleOnly.apply(patch.changes) == [change("m", "style", 5, ["border": ["width": 1], "fill": 2])])
    }

    // MARK: Models created and deleted

    @Test func aCreatedOrDeletedModelIsSentAtItsRootProjected() {
        let filter = ChangeFilter(models: nil, paths: ["color", "style.border"])
        let value: JSONValue = ["color": "red", "size": 1, "style": ["border": 1, "fill": 2]]
        let projected: JSONValue = ["color": "red", "style": ["border": 1]]
        #expect(filter.apply([change("m", .whole, nil, value)]) == [change("m", .whole, nil, projected)])
        #expect(filter.apply([change("m", .whole, value, nil)]) == [change("m", .whole, projected, nil)])
        #expect(filter.apply([change("m", .whole, nil, value)]).first?.kind == .created)
        #expect(filter.apply([change("m", .whole, value, nil)]).first?.kind == .deleted)
        // Even with none of the listed paths in it: the subscriber learns the model exists.
        #expect(filter.apply([change("n", .whole, nil, ["size": 1])]) == [change("n", .whole, nil, [:])])
        #expect(filter.apply([change("n", .whole, ["size": 1], nil)]) == [change("n", .whole, [:], nil)])
        // A model the filter does not follow is neither created nor deleted for it.
        let narrow = ChangeFilter(models: ["m"], paths: ["color"])
        #expect(narrow.apply([change("n", .whole, nil, value), change("m", .whole, nil, value)])
            == [change("m", .whole, nil, ["color": "red"])])
    }

    // MARK: Overlapping paths

    @Test func aPathUnderAnotherAddsNothing() {
        let filter = ChangeFilter(models: nil, paths: ["style.border", "style", "style.border.width", "style"])
        #expect(filter.paths == ["style"])
        #expect(ChangeFilter(models: nil, paths: ["b", "a.c", "a"]).paths == ["a", "b"], "sorted, nested ones dropped")
        #expect(ChangeFilter(models: nil, paths: ["style.border", "style.b"]).paths == ["style.b", "style.border"])
        // A change under both passes once; an ancestor change is cut down once.
        #expect(filter.apply([change("m", "style.border.width", 1, 2)]) == [change("m", "style.border.width", 1, 2)])
        #expect(filter.apply([change("m", .whole, ["style": ["border": 1]], ["style": ["border": 2]])])
            == [change("m", "style", ["border": 1], ["border": 2])])
        #expect(filter.project(model: ["style": ["border": 1, "fill": 2], "x": 1]) == ["style": ["border": 1, "fill": 2]])
        #expect(filter == ChangeFilter(models: nil, paths: ["style"]))
    }

    // MARK: Projection

    @Test func aModelIsProjectedOntoTheListedPaths() {
        let filter = ChangeFilter(models: nil, paths: ["color", "style.border.width", "style.fill", "missing.deep"])
        let value: JSONValue = [
            "color": "red", "size": 3, "style": ["border": ["width": 1, "dash": true], "fill": ["r": 1], "shadow": 2],
        ]
        #expect(filter.project(model: value) == ["color": "red", "style": ["border": ["width": 1], "fill": ["r": 1]]])
        #expect(filter.project(model: ["size": 1]) == [:])
        #expect(filter.project(model: ["style": 5, "missing": ["deep": nil]]) == ["missing": ["deep": nil]],
                "a path through a non-object is absent; a null is a value")
        #expect(ChangeFilter(models: ["x"], paths: nil).project(model: value) == value)
    }

    /// Members keep their places in the model whatever the listed paths' order (the filter keeps
    /// its paths sorted), and their names as stored: a path may name one in another Unicode form.
    @Test func aProjectionKeepsTheModelsMemberOrderAndNames() {
        let filter = ChangeFilter(models: nil, paths: ["a", "style.z", "style.b", "zeta"])
        let value: JSONValue = ["zeta": 1, "style": ["z": 1, "x": 0, "b": 2], "a": 3]
        #expect(filter.project(model: value) == ["zeta": 1, "style": ["z": 1, "b": 2], "a": 3])
        let (decomposed, composed) = ("e\u{301}", "\u{e9}")
        let named = ChangeFilter(models: nil, paths: [ModelKeyPath([decomposed, "x"])])
        #expect(named.project(model: .object([composed: ["x": 1, "y": 2]])) == .object([composed: ["x": 1]]))
    }

    @Test func theModelsAreProjectedAndFiltered() {
        let models: [String: JSONValue] = [
            "tile-1": ["color": "a", "n": 1], "tile-12": ["color": "b", "n": 2], "tile-2": ["color": "c"], "other": ["n": 3],
        ]
        #expect(ChangeFilter(models: ["tile-1*", "other"], paths: ["color"]).project(models) == [
            "tile-1": ["color": "a"], "tile-12": ["color": "b"], "other": [:],
        ])
        #expect(ChangeFilter(models: ["tile-2"], paths: nil).project(models) == ["tile-2": ["color": "c"]])
        #expect(ChangeFilter(models: nil, paths: ["n"]).project(models) == [
            "tile-1": ["n": 1], "tile-12": ["n": 2], "tile-2": [:], "other": ["n": 3],
        ])
        #expect(ChangeFilter.all.project(models) == models)
        #expect(ChangeFilter(models: ["nope"], paths: nil).project(models) == [:])
    }
}
