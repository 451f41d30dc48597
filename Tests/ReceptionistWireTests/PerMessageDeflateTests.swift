import Testing
@testable import ReceptionistWire

/// One offer and what the server must answer (nil: no extension, plain frames).
struct DeflateOffer: Sendable, CustomTestStringConvertible {
    let id: String
    let header: [String]
    let answer: String?

    var testDescription: String { id }
}

private let agreed = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

/// Negotiation (RFC 7692 section 7.1), with the offers of Autobahn TestSuite section 13 and of
/// browsers first.
private let offers: [DeflateOffer] = [
    // What Chromium, Firefox and Python websockets send.
    DeflateOffer(id: "browser", header: ["permessage-deflate; client_max_window_bits"], answer: agreed),
    DeflateOffer(id: "13.1 no parameters", header: ["permessage-deflate"], answer: agreed),
    DeflateOffer(id: "13.2 client_no_context_takeover", header: ["permessage-deflate; client_no_context_takeover"], answer: agreed),
    DeflateOffer(id: "13.3 client_max_window_bits=8", header: ["permessage-deflate; client_max_window_bits=8"], answer: agreed),
    DeflateOffer(id: "13.4 client_max_window_bits=15", header: ["permessage-deflate; client_max_window_bits=15"], answer: agreed),
    DeflateOffer(id: "13.5 both, window 8", header: ["permessage-deflate; client_no_context_takeover; client_max_window_bits=8"], answer: agreed),
    DeflateOffer(id: "13.6 both, window 15", header: ["permessage-deflate; client_no_context_takeover; client_max_window_bits=15"], answer: agreed),
    DeflateOffer(
        id: "13.7 three offers, the first taken",
        header: ["permessage-deflate; client_no_context_takeover; client_max_window_bits=8, permessage-deflate; client_no_context_takeover, permessage-deflate"],
        answer: agreed),
    DeflateOffer(id: "server_no_context_takeover asked", header: ["permessage-deflate; server_no_context_takeover"], answer: agreed),
    DeflateOffer(id: "server window 10", header: ["permessage-deflate; server_max_window_bits=10"], answer: agreed + "; server_max_window_bits=10"),
    // Section 7.1.2.1: a server that accepts the parameter says so, whatever its value.
    DeflateOffer(id: "server window 15 is echoed", header: ["permessage-deflate; server_max_window_bits=15"], answer: agreed + "; server_max_window_bits=15"),
    DeflateOffer(id: "quoted value", header: ["permessage-deflate; server_max_window_bits=\"12\""], answer: agreed + "; server_max_window_bits=12"),
    DeflateOffer(id: "case and spaces", header: ["  PerMessage-Deflate ;Client_Max_Window_Bits "], answer: agreed),
    DeflateOffer(id: "after another extension", header: ["x-webkit-deflate-frame", "permessage-deflate"], answer: agreed),
    // Declined offers (section 7.1: a server declines what it cannot honour), and the next one taken.
    DeflateOffer(id: "server window 8 cannot be made", header: ["permessage-deflate; server_max_window_bits=8"], answer: nil),
    DeflateOffer(
        id: "server window 8, then a plain offer",
        header: ["permessage-deflate; server_max_window_bits=8, permessage-deflate"], answer: agreed),
    DeflateOffer(id: "server window without a value", header: ["permessage-deflate; server_max_window_bits"], answer: nil),
    DeflateOffer(id: "window 16", header: ["permessage-deflate; client_max_window_bits=16"], answer: nil),
    DeflateOffer(id: "window with a leading zero", header: ["permessage-deflate; server_max_window_bits=09"], answer: nil),
    DeflateOffer(id: "window not a number", header: ["permessage-deflate; client_max_window_bits=x"], answer: nil),
    DeflateOffer(id: "value on a flag", header: ["permessage-deflate; server_no_context_takeover=1"], answer: nil),
    DeflateOffer(id: "repeated parameter", header: ["permessage-deflate; client_no_context_takeover; client_no_context_takeover"], answer: nil),
    DeflateOffer(id: "unknown parameter", header: ["permessage-deflate; mux"], answer: nil),
    DeflateOffer(id: "another extension only", header: ["x-webkit-deflate-frame"], answer: nil),
    DeflateOffer(id: "nothing offered", header: [], answer: nil),
]

@Suite struct PerMessageDeflateTests {
    @Test(arguments: offers)
    func answersEachOffer(_ offer: DeflateOffer) {
        #expect(PerMessageDeflate.negotiate(offer.header)?.response == offer.answer)
    }

    @Test func theWindowAskedForIsTheCompressorsWindow() {
        #expect(PerMessageDeflate.negotiate(["permessage-deflate; server_max_window_bits=9"])?.serverMaxWindowBits == 9)
        // Compressed at 9 or 15 only, whatever window is asked: a message at most twice.
        for bits in 9...15 {
            let offer = PerMessageDeflate.negotiate(["permessage-deflate; server_max_window_bits=\(bits)"])
            #expect(offer?.compressionWindowBits == (bits == 15 ? 15 : 9), "\(bits)")
        }
        #expect(PerMessageDeflate.negotiate(["permessage-deflate"])?.serverMaxWindowBits == 15)
        // The client's own window is its business: our inflater takes any.
        #expect(PerMessageDeflate.negotiate(["permessage-deflate; client_max_window_bits=9"])?.serverMaxWindowBits == 15)
    }

    @Test func theHandshakeCarriesTheAnswerOnlyWhenCompressionIsOn() throws {
        let text = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
        let request = try #require(HTTPRequestParser().parse(Array(text.utf8)).requests.first)
        guard case .success(let on) = WebSocketHandshake.accept(request, supported: [], compression: true),
              case .success(let off) = WebSocketHandshake.accept(request, supported: [], compression: false)
        else {
            Issue.record("the upgrade was refused")
            return
        }
        #expect(on.deflate?.serverMaxWindowBits == 15)
        #expect(String(decoding: on.response, as: UTF8.self).hasSuffix("Sec-WebSocket-Extensions: \(agreed)\r\n\r\n"))
        #expect(off.deflate == nil)
        #expect(!String(decoding: off.response, as: UTF8.self).contains("Extensions"))
    }
}
