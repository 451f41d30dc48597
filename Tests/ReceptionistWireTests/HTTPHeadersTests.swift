import ReceptionistWire
import Testing

@Suite struct HTTPHeadersTests {
    /// A pass over the fields, the lookup the index stands in for.
    private func scanned(_ headers: HTTPHeaders, _ name: String) -> String? {
        headers.fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    @Test func aKnownHeaderIsFoundAsAPassWouldFindItInAnyCase() {
        var headers = HTTPHeaders()
        headers.add("user-agent", "t")
        headers.add("HOST", "a:1")
        headers.add("if-none-match", "*")
        headers.add("Host", "b:2")
        headers.add("X-Custom", "c")
        for header in KnownHeader.allCases {
            for name in [header.name, header.name.lowercased(), header.name.uppercased()] {
                #expect(headers[name] == scanned(headers, name), "\(name)")
                #expect(headers[header] == scanned(headers, header.name), "\(header)")
            }
        }
        #expect(headers["Host"] == "a:1", "the first of two")
        #expect(headers["x-custom"] == "c" && headers["User-Agent"] == "t" && headers["Accept"] == nil)
    }

    @Test func aRepeatedKnownHeaderIsTold() {
        let once = HTTPHeaders([("Origin", "o"), ("Authorization", "a"), ("X", "1"), ("X", "2")])
        #expect(once.repeated(among: [.origin, .authorization, .idempotencyKey]) == nil)
        let twice = HTTPHeaders([("Origin", "o"), ("idempotency-key", "k"), ("Idempotency-Key", "k")])
        #expect(twice.repeated(among: [.origin, .authorization, .idempotencyKey]) == .idempotencyKey)
        #expect(twice.repeated(among: [.origin]) == nil)
    }

    @Test func setLeavesOneValueAndTheIndexFollows() {
        var headers = HTTPHeaders([("Host", "a"), ("Accept", "x"), ("host", "b")])
        headers.set("Host", "c")
        #expect(headers["Host"] == "c" && headers.fields.count == 2)
        #expect(headers.repeated(among: [.host]) == nil)
        #expect(headers["Accept"] == "x")
    }

    @Test func aKnownHeaderPastTheIndexedFieldsIsStillFound() {
        var headers = HTTPHeaders()
        for index in 0..<300 { headers.add("X-\(index)", "\(index)") }
        headers.add("Authorization", "Bearer k")
        headers.add("authorization", "Bearer j")
        #expect(headers[.authorization] == "Bearer k" && headers["AUTHORIZATION"] == "Bearer k")
        #expect(headers.repeated(among: [.authorization]) == .authorization)
    }

    @Test func aKnownNameIsToldInAnyCaseAndANearOneIsNot() {
        for header in KnownHeader.allCases {
            for name in [header.name, header.name.lowercased(), header.name.uppercased()] {
                #expect(KnownHeader.named(name) == header, "\(name)")
            }
            var name = Array(header.name.utf8)
            for index in name.indices {
                let kept = name[index]
                for other: UInt8 in [0x5F, 0x5E, 0x7E, 0x0D, 0x2B, kept ^ 0x01] where other | 0x20 != kept | 0x20 {
                    name[index] = other
                    #expect(KnownHeader.named(String(decoding: name, as: UTF8.self)) == nil, "\(name)")
                }
                name[index] = kept
            }
        }
        for name in ["Hos", "Hosts", "X-Host", "", "Content-Lengths", "If-Matc"] { #expect(KnownHeader.named(name) == nil, "\(name)") }
    }
}
