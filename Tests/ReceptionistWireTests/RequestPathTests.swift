import Testing
@testable import ReceptionistWire

@Suite struct RequestPathTests {
    @Test func decodesSegments() throws {
        #expect(try RequestPath(raw: "/").segments == [])
        #expect(try RequestPath(raw: "/a/b%20c.txt").segments == ["a", "b c.txt"])
        #expect(try RequestPath(raw: "//a///b/").segments == ["a", "b"])
        #expect(try RequestPath(raw: "/%C3%A9").segments == ["é"])
    }

    @Test(arguments: [
        ("/..", RequestPath.Problem.traversal),
        ("/a/../../etc/passwd", .traversal),
        ("/%2e%2e/x", .traversal),
        ("/a/%2E%2E/%2e%2e/x", .traversal),
        ("/.%2e/x", .traversal),
        ("/./x", .traversal),
        ("/a%2f..%2f..%2fx", .traversal),
        ("/a%5c..", .traversal),
        ("/a%00b", .nulByte),
        ("/a%zz", .badEncoding),
        ("/a%2", .badEncoding),
        ("/%ff", .badEncoding),
        ("a/b", .notAbsolute),
    ])
    func refusesEscapes(_ raw: String, _ problem: RequestPath.Problem) {
        #expect(throws: problem) { try RequestPath(raw: raw[...]) }
    }
}
