import CHiredis

/// Reads Redis replies from bytes as a connection's reader does, in blocks each reply's root owns
/// (`ReplyBlocks.c`), without a socket: what tests drive that reader and its replies' views with.
///
/// Not thread-safe; one thread at a time.
public final class RedisReplyDecoder {
    private let reader: UnsafeMutablePointer<redisReader>

    public init() {
        guard let reader = receptionist_reply_reader_create() else { fatalError("cannot allocate a Redis reader") }
        self.reader = reader
    }

    deinit {
        redisReaderFree(reader)
    }

    /// Allocations this thread's replies hold now: none once every reply has been read and freed.
    public static var allocationsLive: Int { receptionist_reply_allocations_live() }

    /// Adds bytes to what the next replies are read from.
    public func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { _ = redisReaderFeed(reader, $0.baseAddress, $0.count) }
        }
    }

    /// What the next whole reply is.
    public enum Outcome: Equatable {
        /// A reply, read in place by `read` and then freed: what `read` returned.
        case reply(String)
        /// The bytes so far end inside a reply.
        case incomplete
        /// The bytes are not RESP; the reader keeps this error.
        case failed(String)
    }

    /// Reads the next reply through its view, freeing it after, as a connection does after its
    /// callback.
    public func next(_ read: (RedisReplyView) -> String) -> Outcome {
        var object: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &object) == REDIS_OK else {
            return .failed(withUnsafeBytes(of: reader.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
        }
        guard let object else { return .incomplete }
        defer { reader.pointee.fn.pointee.freeObject(object) }
        return .reply(read(RedisReplyView(UnsafePointer(object.assumingMemoryBound(to: redisReply.self)))))
    }
}
