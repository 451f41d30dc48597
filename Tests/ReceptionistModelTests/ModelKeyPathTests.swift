import ReceptionistJSON
import Testing

@testable import ReceptionistModel

@Suite struct ModelKeyPathTests {
    /// A one-key path is held as its key and a longer one as an array, so a path must take the
    /// same form however it was made, or equal paths would compare unequal and coalescing,
    /// filters and groups would keep them apart.
    @Test func oneKeyIsOneFormHoweverMade() {
        let made: [ModelKeyPath] = [
            "color", ModelKeyPath(["color"]), ModelKeyPath(parsing: "color")!,
            ModelKeyPath(Array(["style", "color"].dropFirst())), ModelKeyPath(["colour"].map { _ in "color" }),
        ]
        for path in made {
            #expect(path == made[0])
            #expect(path.hashValue == made[0].hashValue)
            #expect(path.components == ["color"])
            #expect(path.count == 1)
            #expect(path.description == "color")
        }
        #expect(Set(made).count == 1)
        #expect(ModelKeyPath(["style", "border"]) == "style.border")
        #expect(ModelKeyPath([]) == .whole && ModelKeyPath(parsing: "") == .whole)
        #expect(ModelKeyPath("color") != ModelKeyPath("style.color"))
    }

    @Test func theKeysAreReadInPlaceAsTheyAre() {
        for path in [ModelKeyPath.whole, "color", "style.border.width"] {
            let read = path.withComponents { Array($0) }
            #expect(read == path.components)
            #expect(read.count == path.count)
        }
    }

    /// `isPrefix` across every pair of forms: the whole model, one key, and several.
    @Test func prefixesAcrossForms() {
        let paths: [ModelKeyPath] = [.whole, "a", "b", "a.b", "a.c", "a.b.c", "b.a"]
        for path in paths {
            for other in paths {
                let expected = path.components.count <= other.components.count
                    && Array(other.components.prefix(path.components.count)) == path.components
                #expect(path.isPrefix(of: other) == expected, "\(path) of \(other)")
                #expect(path.isRelated(to: other) == (expected || other.isPrefix(of: path)))
            }
        }
        #expect(ModelKeyPath(parsing: "a..b") == nil)
        #expect(ModelKeyPath(parsing: ".a") == nil)
    }

    /// A path is split at every `.` byte, even one a combining mark follows (one Swift character
    /// with it): no member name holds a `.`, as every client splits the path.
    @Test func aDotBeforeACombiningMarkStillSplits() {
        #expect(ModelKeyPath(parsing: "a.\u{301}b")?.components == ["a", "\u{301}b"])
        #expect(ModelKeyPath(parsing: "a.\u{301}")?.components == ["a", "\u{301}"])
        #expect(ModelKeyPath(parsing: "caf\u{E9}.x")?.components == ["caf\u{E9}", "x"])
        #expect(ModelKeyPath(parsing: "a.\u{301}.") == nil)
    }
}
