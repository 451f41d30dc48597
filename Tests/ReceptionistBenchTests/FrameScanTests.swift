import Testing

@testable import receptionist_bench

@Suite struct FrameScanTests {
    private func scan<T>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        Array(text.utf8).withUnsafeBufferPointer(body)
    }

    @Test func aKeySearchesFirstForItsRarestByte() {
        #expect(FrameScan.Key(#""sentAt":"#).anchor == 5)
        #expect(FrameScan.Key(#""firstCommittedAt":"#).anchor == 6)
        #expect(FrameScan.Key(#""version":"#).anchor == 1)
        #expect(FrameScan.Key(#""from":"#).anchor == 1)
        #expect(FrameScan.Key(#"::"#).anchor == 0)
    }

    @Test func findsTheFirstWholeKeyPastNearMissesOfItsAnchor() {
        let sentAt = FrameScan.Key(#""sentAt":"#)
        // The anchor `A` stops first in `publishedAt`, then in a value and a longer key.
        let message = #"{"type":"message","topic":"bench","seq":12,"publishedAt":1795,"data":{"x":"A","sentAtX":7,"sentAt":1234,"sentAt":99}}"#
        #expect(scan(message) { FrameScan.number(after: sentAt, in: $0) } == 1234)
        // The bare body a peer relays: the key at the start.
        #expect(scan(#"{"sentAt":42,"host":"web-1"}"#) { FrameScan.number(after: sentAt, in: $0) } == 42)
        #expect(scan(#"{"sentAt":42}"#) { FrameScan.end(of: sentAt, in: $0) } == 10)
    }

    @Test func aKeyThatIsAbsentCutShortOrWithoutANumberGivesNothing() {
        let sentAt = FrameScan.Key(#""sentAt":"#)
        #expect(scan(#"{"publishedAt":1,"sentA":2}"#) { FrameScan.number(after: sentAt, in: $0) } == nil)
        #expect(scan(#"{"sentAt""#) { FrameScan.number(after: sentAt, in: $0) } == nil)
        #expect(scan(#"{"sentAt":"#) { FrameScan.number(after: sentAt, in: $0) } == nil)
        #expect(scan(#"{"sentAt":"soon"}"#) { FrameScan.number(after: sentAt, in: $0) } == nil)
        #expect(scan("") { FrameScan.number(after: sentAt, in: $0) } == nil)
    }

    @Test func aChangesFramesHeadEndsAtItsListAndHoldsItsVersions() {
        let frame = #"{"type":"changes","store":"s","version":1290,"from":1250,"conflated":true,"changes":[{"model":"m","path":"version","value":{"from":3}}]}"#
        scan(frame) { text in
            let head = FrameScan.head(text)
            #expect(String(decoding: head, as: UTF8.self).hasSuffix(#""changes":"#))
            #expect(FrameScan.number(after: FrameScan.Key(#""version":"#), in: head) == 1290)
            #expect(FrameScan.number(after: FrameScan.Key(#""from":"#), in: head) == 1250)
            #expect(FrameScan.hasPrefix(text, Array(#"{"type":"changes""#.utf8)))
            #expect(!FrameScan.hasPrefix(text, Array(#"{"type":"snapshot""#.utf8)))
        }
        scan("{}") { #expect(FrameScan.head($0).count == 2) }
    }

    @Test func flagsAreReadAfterTheirKey() {
        let reset = FrameScan.Key(#""reset":"#)
        #expect(scan(#"{"type":"snapshot","reset":true}"#) { FrameScan.flag(after: reset, in: $0) } == true)
        #expect(scan(#"{"reset":false}"#) { FrameScan.flag(after: reset, in: $0) } == false)
        #expect(scan(#"{"reset":null}"#) { FrameScan.flag(after: reset, in: $0) } == nil)
        #expect(scan(#"{"resets":true}"#) { FrameScan.flag(after: reset, in: $0) } == nil)
    }

    @Test func aShortTextIsNotReadPastItsEnd() {
        #expect(scan(#"{"ty"#) { FrameScan.hasPrefix($0, Array(#"{"type":"changes""#.utf8)) } == false)
        #expect(scan("") { FrameScan.hasPrefix($0, []) } == true)
    }
}
