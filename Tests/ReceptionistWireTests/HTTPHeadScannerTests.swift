import Testing
@testable import ReceptionistWire

@Suite struct HTTPHeadScannerTests {
    /// Scans `head` in two pieces split at `split`; the result of the second scan, with the index
    /// made relative to the whole head.
    private func scan(_ head: String, maxBytes: Int, split: Int) -> HTTPHeadScanner.Result {
        let bytes = Array(head.utf8)
        var scanner = HTTPHeadScanner(maxBytes: maxBytes)
        let first = bytes.withUnsafeBytes { scanner.scan(UnsafeRawBufferPointer(rebasing: $0[..<split]), from: 0) }
        guard first == .needMore else { return first }
        let second = bytes.withUnsafeBytes { scanner.scan(UnsafeRawBufferPointer(rebasing: $0[split...]), from: 0) }
        switch second {
        case .complete(let end): return .complete(end: end + split)
        case .invalid(let reason, let at): return .invalid(reason, at: at + split)
        case .tooLarge(let at): return .tooLarge(at: at + split)
        case .needMore: return .needMore
        }
    }

    /// The token set is RFC 9110 §5.6.2's tchar, byte for byte over all 256 values.
    @Test func tokenBytesAreExactlyTchar() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8))
        #expect(tchar.count == 77)
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPHeadScanner.isTokenByte(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }

    /// Methods, targets, field names and values are passed over as runs; wherever a read splits
    /// the head, the head still ends where it ends, the byte past the size limit is the one
    /// reported (the limit inside each kind of run, at the last byte), and so is a bad byte.
    @Test func runsEndAtTheSameByteWhereverTheHeadIsSplit() {
        let head = "GET /a/long/target?q=1 HTTP/1.1\r\nHost: a\r\nX-Value: some plain\tvalue text\r\n\r\n"
        let length = head.utf8.count
        let targetLimit = 12, valueLimit = head.utf8.count - 10
        let broken = "GET /a/long/target?q=1 HTTP/1.1\r\nHost: a\r\nX-Value: some pl\u{1}in\tvalue text\r\n\r\n"
        let badAt = Array(broken.utf8).firstIndex(of: 1)!
        let badName = "GET / HTTP/1.1\r\nHost: a\r\nX-Va\"lue: v\r\n\r\n"
        let badNameAt = Array(badName.utf8).firstIndex(of: UInt8(ascii: "\""))!
        let nameLimit = Array(head.utf8).firstIndex(of: UInt8(ascii: "X"))! + 3
        for split in 0...length {
            #expect(scan(head, maxBytes: length, split: split) == .complete(end: length), "split \(split)")
            #expect(scan(head, maxBytes: length - 1, split: split) == .tooLarge(at: length - 1), "split \(split)")
            #expect(scan(head, maxBytes: targetLimit, split: split) == .tooLarge(at: targetLimit), "split \(split)")
            #expect(scan(head, maxBytes: valueLimit, split: split) == .tooLarge(at: valueLimit), "split \(split)")
            #expect(scan(head, maxBytes: 2, split: split) == .tooLarge(at: 2), "split \(split)")
            #expect(scan(head, maxBytes: nameLimit, split: split) == .tooLarge(at: nameLimit), "split \(split)")
            #expect(scan(broken, maxBytes: 1024, split: split) == .invalid("control character in header value", at: badAt))
            if split <= badName.utf8.count {
                #expect(scan(badName, maxBytes: 1024, split: split) == .invalid("malformed header name", at: badNameAt))
            }
        }
    }
}
