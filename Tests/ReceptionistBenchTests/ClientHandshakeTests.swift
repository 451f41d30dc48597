import ReceptionistWire
import Testing

@testable import receptionist_bench

@Suite struct ClientHandshakeTests {
    private func response(to handshake: ClientHandshake, accept: String? = nil, extra: String = "") -> [UInt8] {
        let request = String(decoding: handshake.request, as: UTF8.self)
        let keyLine = request.split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Key: ") }!
        let key = String(keyLine.dropFirst("Sec-WebSocket-Key: ".count))
        let value = accept ?? WebSocketHandshake.acceptKey(for: key)
        return Array(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "SEC-WEBSOCKET-ACCEPT:  \(value) \r\n\(extra)\r\n").utf8)
    }

    @Test func eachRequestCarriesAFreshSixteenByteKey() {
        let keys = (0..<50).map { _ in
            String(decoding: ClientHandshake(host: "h", port: 1, path: "/ws", subprotocol: nil).request, as: UTF8.self)
                .split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Key: ") }!
        }
        #expect(Set(keys).count == 50)
        // 16 bytes in base64: 22 characters and two of padding.
        #expect(keys.allSatisfy { $0.dropFirst("Sec-WebSocket-Key: ".count).count == 24 && $0.hasSuffix("==") })
    }

    @Test func anUpgradeIsAcceptedWhateverTheHeadersCaseAndTheBytesAfterItAreKept() {
        var handshake = ClientHandshake(host: "h", port: 1, path: "/ws", subprotocol: "receptionist.v1")
        let head = response(
            to: handshake, extra: "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n")
        let bytes = head + [0x81, 0x02, 0x68, 0x69]
        // Fed in two parts: the head is complete only with the second.
        let first = bytes.withUnsafeBytes { handshake.read(UnsafeRawBufferPointer(rebasing: $0[..<10])) }
        guard case .incomplete = first else { Issue.record("answered \(first) before the head was complete"); return }
        let outcome = bytes.withUnsafeBytes { handshake.read(UnsafeRawBufferPointer(rebasing: $0[10...])) }
        guard case .accepted(let rest, let extensions) = outcome else { Issue.record("not accepted: \(outcome)"); return }
        #expect(rest == [0x81, 0x02, 0x68, 0x69])
        #expect(extensions == "permessage-deflate; server_no_context_takeover")
    }

    @Test func aWrongAcceptOrAnotherStatusIsRefused() {
        var handshake = ClientHandshake(host: "h", port: 1, path: "/ws", subprotocol: nil)
        let wrong = response(to: handshake, accept: "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        guard case .refused(let reason) = wrong.withUnsafeBytes({ handshake.read($0) }) else {
            Issue.record("a wrong accept was taken")
            return
        }
        #expect(reason.contains("Sec-WebSocket-Accept"))

        var refused = ClientHandshake(host: "h", port: 1, path: "/ws", subprotocol: nil)
        let forbidden = Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".utf8)
        guard case .refused(let status) = forbidden.withUnsafeBytes({ refused.read($0) }) else {
            Issue.record("a 403 was taken")
            return
        }
        #expect(status.contains("403"))
    }
}
