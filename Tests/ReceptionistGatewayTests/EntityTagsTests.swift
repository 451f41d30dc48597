import Testing

@testable import ReceptionistGateway

@Suite struct EntityTagsTests {
    private let none: UInt64 = .max

    /// RFC 9110's list: empty elements skipped, `*` alone, weak tags never matching, tags compared
    /// as text (only the gateway's own form of a number names a version), a bare number taken as
    /// its tag; anything else malformed.
    @Test func anIfMatchListIsReadAsTheRFCWritesIt() {
        #expect(EntityTags.parseList("*") == .some(nil))
        #expect(EntityTags.parseList("\"5\"") == .some([5]))
        #expect(EntityTags.parseList("\"5\", \"9\"") == .some([5, 9]))
        #expect(EntityTags.parseList("19") == .some([19]))
        for (empties, tags) in [("\"5\",", [5]), (", \"5\"", [5]), ("\"5\",,\"9\"", [5, 9]), (" ,\t\"5\" , ", [5])] as [(String, [UInt64])] {
            #expect(EntityTags.parseList(empties) == .some(tags), "\(empties)")
        }
        #expect(EntityTags.parseList("W/\"5\"") == .some([none]), "a weak tag matches nothing")
        #expect(EntityTags.parseList("\"055\"") == .some([none]), "not \"55\": tags compare as text")
        #expect(EntityTags.parseList("\"00000000000000000000000062\"") == .some([none]))
        #expect(EntityTags.parseList("\"abc\"") == .some([none]))
        for malformed in ["", ",", "\"68", "x\"66\"", "\"65\"x", "w/\"46\"", "\"38\" \"9999\"", "*, \"40\"", "W/5", "055", "-1"] {
            #expect(EntityTags.parseList(malformed) == nil, "\(malformed)")
        }
    }
}
