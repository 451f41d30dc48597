@testable import ReceptionistPush
import ReceptionistWire
import Testing

private func json(_ count: Int) -> [UInt8] {
    var text = ""
    var index = 0
    while text.utf8.count < count {
        text += "{\"metric\":\"cpu-\(index % 16)\",\"value\":\(index * 31 % 97)},"
        index += 1
    }
    return Array(text.utf8.prefix(count))
}

/// What a browser makes of a server frame: the message, inflated when RSV1 says so.
private func receive(_ frame: [UInt8]) -> (messages: [WebSocketMessage], error: WebSocketError?) {
    var decoder = WebSocketDecoder(role: .client, maxMessageBytes: 1 << 20, inflater: ZlibStream(.inflate))
    return decoder.decode(frame)
}

/// Invariant 35: a broadcast is compressed once and every subscriber that agreed shares it.
@Suite struct PushEventCompressionTests {
    @Test func oneCompressedFrameSharedByEverySubscriber() throws {
        let event = PushEvent(name: "message", id: 7, json: json(2000))
        let compressor = ZlibStream(.deflate(windowBits: 15, level: 6))
        let first = event.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256).frame
        // A thousand subscribers ask; each gets the same object, not an equal copy.
        for _ in 0..<1000 {
            #expect(event.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256).frame === first)
        }
        let bytes = first.array
        #expect(bytes[0] == 0xC1, "FIN, RSV1 and text")
        #expect(bytes.count < 1000)
        let received = receive(bytes)
        #expect(received.error == nil)
        #expect(received.messages == [.text(String(decoding: event.json, as: UTF8.self))])
        // The plain frame is still there, for subscribers that did not agree.
        #expect(event.webSocketFrame.array == WebSocketEncoder.frame(.text, payload: event.json))
    }

    @Test func aRunIsItsMessagesFramesEachCompressedOrNot() throws {
        let compressor = ZlibStream(.deflate(windowBits: 15, level: 6))
        let messages = [
            PushEvent(name: "message", id: 1, json: json(2000)),
            PushEvent(name: "message", id: 2, json: json(100)),
            PushEvent(name: "message", id: 3, json: json(3000)),
        ]
        let run = PushEvent(run: messages)
        let (frame, compressed) = run.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256)
        #expect(compressed == 2, "the short message stays plain")
        #expect(run.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256).frame === frame)
        // The messages' own frames, shared with anyone given them one by one (a replay).
        #expect(frame.array == messages.flatMap { $0.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256).frame.array })
        let received = receive(frame.array)
        #expect(received.error == nil)
        #expect(received.messages == messages.map { .text(String(decoding: $0.json, as: UTF8.self)) })
    }

    @Test func underTheThresholdTheFrameIsPlain() {
        let compressor = ZlibStream(.deflate(windowBits: 15, level: 6))
        let small = PushEvent(name: "message", id: 1, json: json(255))
        #expect(small.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256).frame === small.webSocketFrame)
        #expect(small.webSocketFrame.array[0] == 0x81, "RSV1 clear")
        let atThreshold = PushEvent(name: "message", id: 1, json: json(256))
        #expect(atThreshold.compressedWebSocketFrame(compressedBy: compressor, minBytes: 256).frame.array[0] == 0xC1)
        // The threshold is the caller's (--compression-min-bytes).
        #expect(small.compressedWebSocketFrame(compressedBy: compressor, minBytes: 100).frame.array[0] == 0xC1)
    }

    @Test func aMessageThatWouldNotShrinkGoesPlain() {
        var state: UInt32 = 9
        // Bytes of every value at random: deflate can only store them, a few bytes longer.
        let noise = (0..<4000).map { _ -> UInt8 in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
        let event = PushEvent(name: "message", id: 1, json: noise)
        let frame = event.compressedWebSocketFrame(compressedBy: ZlibStream(.deflate(windowBits: 15, level: 6)), minBytes: 256).frame
        #expect(frame === event.webSocketFrame)
    }

    @Test func eachWindowIsCompressedOnceAndDecodes() {
        let event = PushEvent(name: "changes", id: 3, json: json(40_000))
        let wide = ZlibStream(.deflate(windowBits: 15, level: 6))
        let narrow = ZlibStream(.deflate(windowBits: 9, level: 6))
        let wideFrame = event.compressedWebSocketFrame(compressedBy: wide, minBytes: 256).frame
        let narrowFrame = event.compressedWebSocketFrame(compressedBy: narrow, minBytes: 256).frame
        #expect(wideFrame !== narrowFrame)
        #expect(event.compressedWebSocketFrame(compressedBy: narrow, minBytes: 256).frame === narrowFrame)
        #expect(event.compressedWebSocketFrame(compressedBy: wide, minBytes: 256).frame === wideFrame)
        for frame in [wideFrame, narrowFrame] {
            #expect(receive(frame.array).messages == [.text(String(decoding: event.json, as: UTF8.self))])
        }
    }
}
