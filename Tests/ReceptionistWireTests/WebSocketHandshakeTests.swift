import Testing
@testable import ReceptionistWire

private let sampleKey = "dGhlIHNhbXBsZSBub25jZQ=="
// RFC 6455 section 1.3.
private let sampleAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

/// A browser-like upgrade request, with `changes` replacing (or, with nil, removing) headers.
private func upgradeRequest(
    method: HTTPMethod = .get, minor: Int = 1, _ changes: [(String, String?)] = [], extra: [(String, String)] = []
) -> HTTPRequest {
    var fields: [(name: String, value: String)] = [
        ("Host", "example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", sampleKey), ("Sec-WebSocket-Version", "13"),
    ]
    for (name, value) in changes {
        if let index = fields.firstIndex(where: { $0.name == name }) {
            if let value { fields[index].value = value } else { fields.remove(at: index) }
        } else if let value {
            fields.append((name, value))
        }
    }
    fields += extra.map { (name: $0.0, value: $0.1) }
    return HTTPRequest(method: method, target: "/ws", versionMinor: minor, headers: HTTPHeaders(fields), isUpgrade: true)
}

private func refusal(_ request: HTTPRequest, supported: [String] = []) -> WebSocketHandshake.Refusal? {
    if case .failure(let refusal) = WebSocketHandshake.accept(request, supported: supported) { return refusal }
    return nil
}

private func accepted(_ request: HTTPRequest, supported: [String] = []) -> WebSocketHandshake.Accepted? {
    if case .success(let accepted) = WebSocketHandshake.accept(request, supported: supported) { return accepted }
    return nil
}

@Suite struct WebSocketHandshakeTests {
    @Test func acceptKeyMatchesRFC6455() {
        #expect(WebSocketHandshake.acceptKey(for: sampleKey) == sampleAccept)
        #expect(WebSocketHandshake.guid == "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
        // The digest the RFC prints for that key, byte for byte.
        let digest: [UInt8] = [
            0xB3, 0x7A, 0x4F, 0x2C, 0xC0, 0x62, 0x4F, 0x16, 0x90, 0xF6, 0x46, 0x06, 0xCF, 0x38, 0x59, 0x45, 0xB2, 0xBE, 0xC4, 0xEA,
        ]
        #expect(Base64.decode(sampleAccept) == digest)
    }

    @Test func acceptsAnUpgradeWithTheExact101Head() throws {
        let result = try #require(accepted(upgradeRequest()))
        #expect(result.subprotocol == nil)
        let head = String(decoding: result.response, as: UTF8.self)
        #expect(
            head == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(sampleAccept)\r\n\r\n")
    }

    @Test func acceptsWhatAParsedBrowserRequestCarries() throws {
        let text = "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key:  \(sampleKey) \r\n"
            + "Sec-WebSocket-Protocol: chat, receptionist.v1\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
        let request = try #require(HTTPRequestParser().parse(Array(text.utf8)).requests.first)
        let result = try #require(accepted(request, supported: ["receptionist.v1"]))
        #expect(result.subprotocol == "receptionist.v1")
        let head = String(decoding: result.response, as: UTF8.self)
        #expect(head.hasSuffix("Sec-WebSocket-Accept: \(sampleAccept)\r\nSec-WebSocket-Protocol: receptionist.v1\r\n\r\n"))
        // Without compression asked for, no extension is agreed to.
        #expect(!head.contains("Extensions"))
    }

    @Test func tokensAreCaseInsensitiveAndMayComeInLists() {
        #expect(accepted(upgradeRequest([("Upgrade", "WEBSOCKET")])) != nil)
        #expect(accepted(upgradeRequest([("Upgrade", "h2c, websocket")])) != nil)
        #expect(accepted(upgradeRequest([("Connection", "keep-alive,upgrade")])) != nil)
        #expect(accepted(upgradeRequest([("Connection", "keep-alive")], extra: [("Connection", "UPGRADE")])) != nil)
        #expect(accepted(upgradeRequest([("Sec-WebSocket-Version", " 13 ")])) != nil)
        #expect(accepted(upgradeRequest(minor: 2)) != nil)
    }

    // MARK: - Subprotocols

    @Test func theFirstSupportedOfferedSubprotocolIsChosen() {
        let offered = upgradeRequest([("Sec-WebSocket-Protocol", "a, b")])
        #expect(accepted(offered, supported: ["b", "a"])?.subprotocol == "b")
        #expect(accepted(offered, supported: ["c", "a"])?.subprotocol == "a")
        let split = upgradeRequest([("Sec-WebSocket-Protocol", "x")], extra: [("Sec-WebSocket-Protocol", "y,receptionist.v1")])
        let result = accepted(split, supported: ["receptionist.v1"])
        #expect(result?.subprotocol == "receptionist.v1")
        let head = String(decoding: result?.response ?? [], as: UTF8.self)
        #expect(head.contains("\r\nSec-WebSocket-Protocol: receptionist.v1\r\n"))
    }

    @Test func offeringOnlyUnsupportedSubprotocolsIsRefused() {
        let request = upgradeRequest([("Sec-WebSocket-Protocol", "chat, superchat")])
        #expect(refusal(request, supported: ["receptionist.v1"])?.status == .badRequest)
        #expect(refusal(request, supported: [])?.status == .badRequest)
        // Names are case-sensitive.
        #expect(refusal(upgradeRequest([("Sec-WebSocket-Protocol", "Receptionist.V1")]), supported: ["receptionist.v1"]) != nil)
    }

    @Test func offeringNoSubprotocolIsServedWithout() {
        for request in [upgradeRequest(), upgradeRequest([("Sec-WebSocket-Protocol", " ")])] {
            let result = accepted(request, supported: ["receptionist.v1"])
            #expect(result?.subprotocol == nil)
            let head = String(decoding: result?.response ?? [], as: UTF8.self)
            #expect(head.hasPrefix("HTTP/1.1 101 "))
            #expect(!head.contains("Sec-WebSocket-Protocol"))
        }
    }

    // MARK: - Refusals

    @Test func nonGetIsRefusedWith405() {
        let refused = refusal(upgradeRequest(method: .post))
        #expect(refused?.status == .methodNotAllowed)
        #expect(refused?.headers["Allow"] == "GET")
    }

    @Test func http10IsRefused() {
        #expect(refusal(upgradeRequest(minor: 0))?.status == .badRequest)
    }

    @Test(arguments: [
        [("Upgrade", nil)], [("Upgrade", "h2c")], [("Upgrade", "websocket2")], [("Connection", nil)],
        [("Connection", "keep-alive")], [("Connection", "upgraded")],
    ] as [[(String, String?)]])
    func missingOrWrongUpgradeHeadersAreRefusedWith400(_ changes: [(String, String?)]) {
        let refused = refusal(upgradeRequest(changes))
        #expect(refused?.status == .badRequest)
        #expect(refused?.headers.fields.isEmpty == true)
    }

    @Test(arguments: [nil, "8", "12", "14", "13, 8", "", "thirteen"] as [String?])
    func otherVersionsAreRefusedWith426(_ version: String?) {
        let refused = refusal(upgradeRequest([("Sec-WebSocket-Version", version)]))
        #expect(refused?.status == .upgradeRequired)
        #expect(refused?.status.code == 426)
        #expect(refused?.headers["Sec-WebSocket-Version"] == "13")
    }

    @Test(arguments: [
        nil, "", "not base64!", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ=",
        "dGhlIHNhbXBsZSBub25jZSE=",  // 17 bytes
        "dGhlIHNhbXBsZSBub25j",  // 15 bytes
        "dGhlIHNhbXBsZSBub25jZR==",  // unused bits set
    ] as [String?])
    func badKeysAreRefusedWith400(_ key: String?) {
        #expect(refusal(upgradeRequest([("Sec-WebSocket-Key", key)]))?.status == .badRequest)
    }

    @Test func twoKeysAreRefused() {
        #expect(refusal(upgradeRequest(extra: [("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA==")]))?.status == .badRequest)
    }

    @Test func theVersionIsCheckedBeforeTheKey() {
        // A client speaking an older draft gets told which version to use, not that its key is odd.
        let refused = refusal(upgradeRequest([("Sec-WebSocket-Version", "8"), ("Sec-WebSocket-Key", nil)]))
        #expect(refused?.status == .upgradeRequired)
    }
}
