import CHiredis
import Glibc

/// What a Redis reply is read through, whether copied (`RedisReply`) or read in place
/// (`RedisReplyView`): parsers written once against this read both.
public protocol RedisReplyReading {
    associatedtype Elements: RandomAccessCollection<Self> where Elements.Index == Int
    /// An array reply's elements; nil for any other reply.
    var elements: Elements? { get }
    /// A bulk or status string's bytes; nil for any other reply.
    var bytes: [UInt8]? { get }
    /// A bulk or status string as text; nil for any other reply.
    var text: String? { get }
    /// Whether this is a bulk string of exactly `text`'s bytes.
    func isBulk(_ text: String) -> Bool
}

extension RedisReply: RedisReplyReading {
    public func isBulk(_ text: String) -> Bool {
        if case .string(let bytes) = self { return bytes.elementsEqual(text.utf8) }
        return false
    }
}

/// A reply as hiredis holds it, read in place, with nothing copied but what is asked for. Valid
/// only during the callback it is handed to: hiredis frees the reply when that returns, so a view
/// is never kept (`copied` makes a value that may be).
public struct RedisReplyView: RedisReplyReading {
    /// Nil for an element hiredis left out, read as a nil reply.
    private let reply: UnsafePointer<redisReply>?

    init(_ reply: UnsafePointer<redisReply>?) {
        self.reply = reply
    }

    /// The whole reply as a value of its own.
    public var copied: RedisReply { reply.map { RedisReply($0) } ?? .null }

    public var elements: Elements? {
        guard let reply, reply.pointee.type == REDIS_REPLY_ARRAY else { return nil }
        return Elements(base: reply.pointee.element, count: Int(reply.pointee.elements))
    }

    public var bytes: [UInt8]? {
        withBytes { Array($0) }
    }

    public var text: String? {
        withBytes { String(decoding: $0, as: UTF8.self) }
    }

    public func isBulk(_ text: String) -> Bool {
        guard let reply, reply.pointee.type == REDIS_REPLY_STRING, reply.pointee.len == text.utf8.count else { return false }
        guard reply.pointee.len > 0 else { return true }
        // Compared as two buffers: the UTF-8 view's generic `elementsEqual` cost a subscriber
        // about 380 instructions to tell each message from a `subscribe` confirmation.
        var text = text
        return text.withUTF8 { memcmp(reply.pointee.str, $0.baseAddress!, $0.count) == 0 }
    }

    /// A bulk or status string's bytes, read in place; nil for any other reply.
    public func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        guard let reply, reply.pointee.type == REDIS_REPLY_STRING || reply.pointee.type == REDIS_REPLY_STATUS else { return nil }
        return body(UnsafeRawBufferPointer(start: reply.pointee.str, count: reply.pointee.str == nil ? 0 : reply.pointee.len))
    }

    /// An array reply's elements, read in place.
    public struct Elements: RandomAccessCollection {
        fileprivate let base: UnsafeMutablePointer<UnsafeMutablePointer<redisReply>?>?
        public let count: Int

        public var startIndex: Int { 0 }
        public var endIndex: Int { count }

        public subscript(position: Int) -> RedisReplyView {
            precondition(position >= 0 && position < count, "index out of range")
            return RedisReplyView(base?[position])
        }
    }
}
