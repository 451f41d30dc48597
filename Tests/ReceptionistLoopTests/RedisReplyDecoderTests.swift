import ReceptionistLoop
import ReceptionistTestSupport
import Testing

/// Replies as Redis writes them (RESP2).
private func encode(_ reply: RedisReply, into out: inout [UInt8]) {
    switch reply {
    case .string(let bytes):
        out += Array("$\(bytes.count)\r\n".utf8) + bytes + [13, 10]
    case .status(let text):
        out += Array("+\(text)\r\n".utf8)
    case .error(let text):
        out += Array("-\(text)\r\n".utf8)
    case .integer(let value):
        out += Array(":\(value)\r\n".utf8)
    case .null:
        out += Array("$-1\r\n".utf8)
    case .array(let elements):
        out += Array("*\(elements.count)\r\n".utf8)
        for element in elements { encode(element, into: &out) }
    }
}

/// A reply of every kind, nested up to `depth` arrays deep, of at most about `budget` elements;
/// now and then a long string, which takes a block of its own, or a long array.
private func randomReply(depth: Int, budget: inout Int, using generator: inout SeededGenerator) -> RedisReply {
    budget -= 1
    switch Int.random(in: 0..<(depth > 0 && budget > 0 ? 7 : 5), using: &generator) {
    case 0:
        let count = Int.random(in: 0..<300, using: &generator) == 0
            ? Int.random(in: 4_000...300_000, using: &generator) : Int.random(in: 0...40, using: &generator)
        return .string((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    case 1: return .status(String(repeating: "OK", count: Int.random(in: 0...3, using: &generator)))
    case 2: return .error("ERR \(Int.random(in: 0...99, using: &generator))")
    case 3: return .integer(Int64.random(in: Int64.min...Int64.max, using: &generator))
    case 4: return .null
    default:
        let count = min(budget, Int.random(in: 0...(Int.random(in: 0..<8, using: &generator) == 0 ? 600 : 12), using: &generator))
        var elements: [RedisReply] = []
        for _ in 0..<max(count, 0) { elements.append(randomReply(depth: depth - 1, budget: &budget, using: &generator)) }
        return .array(elements)
    }
}

/// What a view reads, copied whole: the tree the reader built, element by element.
private func describe(_ view: RedisReplyView) -> String {
    "\(view.copied)"
}

struct RedisReplyDecoderTests {
    /// Every kind of reply, nested, fed in pieces of every size, reads exactly as it was written,
    /// and once each has been freed no block is left: the blocks a reply is built in belong to it
    /// alone, however many of them it took.
    @Test func repliesBuiltInBlocksReadAsWrittenAndLeaveNothingBehind() {
        let before = RedisReplyDecoder.allocationsLive
        var generator = SeededGenerator(state: 37)
        for round in 0..<60 {
            let decoder = RedisReplyDecoder()
            var budget = 2_000
            let replies = (0..<Int.random(in: 1...8, using: &generator)).map { _ in
                randomReply(depth: 6, budget: &budget, using: &generator)
            }
            var bytes: [UInt8] = []
            for reply in replies { encode(reply, into: &bytes) }
            var read: [String] = []
            var offset = 0
            while offset < bytes.count {
                let size = Int.random(in: 1...(round % 2 == 0 ? 64 : 70_000), using: &generator)
                decoder.feed(Array(bytes[offset..<min(bytes.count, offset + size)]))
                offset += size
                while case .reply(let text) = decoder.next(describe) { read.append(text) }
            }
            #expect(decoder.next(describe) == .incomplete)
            #expect(read == replies.map { "\($0)" }, "round \(round)")
            #expect(RedisReplyDecoder.allocationsLive == before, "round \(round)")
        }
    }

    /// A reply far bigger than a block (a 3 MiB string among 2,000 others) is read whole, and its
    /// blocks are freed with it.
    @Test func aReplyBiggerThanAnyBlockIsReadWhole() {
        let before = RedisReplyDecoder.allocationsLive
        let big = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let reply = RedisReply.array((0..<2_000).map { .string(Array(repeating: UInt8($0 % 251), count: 1_024)) } + [.string(big)])
        var bytes: [UInt8] = []
        encode(reply, into: &bytes)
        let decoder = RedisReplyDecoder()
        decoder.feed(bytes)
        var during = 0
        let outcome = decoder.next { view in
            during = RedisReplyDecoder.allocationsLive - before
            return "\(view.copied == reply) \(view.elements?.count ?? 0) \(view.elements?.last?.bytes == big)"
        }
        #expect(outcome == .reply("true 2001 true"))
        #expect(during > 1)
        #expect(RedisReplyDecoder.allocationsLive == before)
    }

    /// Bytes that stop being RESP inside an array fail the reader, and the part of the reply it
    /// had built is freed then.
    @Test func aReplyCutByBadBytesIsFreedWithTheError() {
        let before = RedisReplyDecoder.allocationsLive
        let decoder = RedisReplyDecoder()
        decoder.feed(Array("*3\r\n$1\r\na\r\n*2\r\n:7\r\n".utf8))
        #expect(decoder.next(describe) == .incomplete)
        #expect(RedisReplyDecoder.allocationsLive > before)
        decoder.feed(Array("?what\r\n".utf8))
        guard case .failed(let reason) = decoder.next(describe) else {
            Issue.record("bad bytes were read as a reply")
            return
        }
        #expect(reason.contains("Protocol error"))
        #expect(RedisReplyDecoder.allocationsLive == before)
    }

    /// Replies that are not arrays, each in an allocation of its own, read as written too; an
    /// empty array has no elements.
    @Test func repliesOfOneElementReadAsWritten() {
        let before = RedisReplyDecoder.allocationsLive
        let decoder = RedisReplyDecoder()
        decoder.feed(Array("$0\r\n\r\n+PONG\r\n-ERR no\r\n:-12\r\n$-1\r\n*0\r\n*-1\r\n".utf8))
        var read: [String] = []
        while case .reply(let text) = decoder.next({ "\($0.copied) \($0.text ?? "-") \($0.elements?.count ?? -1)" }) {
            read.append(text)
            #expect(RedisReplyDecoder.allocationsLive == before)
        }
        #expect(read == [
            "string([]) \(String()) -1", "status(\"PONG\") PONG -1", "error(\"ERR no\") - -1", "integer(-12) - -1",
            "null - -1", "array([]) - 0", "null - -1",
        ])
    }

    /// `isBulk` is true only for a bulk string of exactly those bytes: not a status with them,
    /// not a longer or shorter string, nor one of the same length that differs.
    @Test func aBulkStringIsTheTextOnlyWhenEveryByteIs() {
        let decoder = RedisReplyDecoder()
        decoder.feed(Array("*6\r\n$7\r\nmessage\r\n+message\r\n$8\r\nmessages\r\n$6\r\nmessag\r\n$7\r\nmessagE\r\n$0\r\n\r\n".utf8))
        let read = decoder.next { view in
            (view.elements?.map { element in
                ["message", "", "messagE"].map { element.isBulk($0) ? "1" : "0" }.joined()
            } ?? []).joined(separator: " ")
        }
        #expect(read == .reply("100 000 000 000 001 010"))
    }
}
