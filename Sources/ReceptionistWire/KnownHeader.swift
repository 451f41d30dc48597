/// The request header fields the gateway reads on every request. `HTTPHeaders` notes where each
/// first stands as the fields are added, so reading one is an index, and telling whether one came
/// twice a bit, instead of a pass over every field comparing names.
public enum KnownHeader: Int, CaseIterable, Sendable {
    case host, origin, authorization, idempotencyKey, ifMatch, ifNoneMatch, ifUnmodifiedSince, contentType, lastEventID
    case contentLength, transferEncoding, connection, expect

    /// The field's name as the standards spell it.
    public var name: String {
        switch self {
        case .host: "Host"
        case .origin: "Origin"
        case .authorization: "Authorization"
        case .idempotencyKey: "Idempotency-Key"
        case .ifMatch: "If-Match"
        case .ifNoneMatch: "If-None-Match"
        case .ifUnmodifiedSince: "If-Unmodified-Since"
        case .contentType: "Content-Type"
        case .lastEventID: "Last-Event-ID"
        case .contentLength: "Content-Length"
        case .transferEncoding: "Transfer-Encoding"
        case .connection: "Connection"
        case .expect: "Expect"
        }
    }

    /// The name in lower case, as names are compared.
    var lowercased: StaticString {
        switch self {
        case .host: "host"
        case .origin: "origin"
        case .authorization: "authorization"
        case .idempotencyKey: "idempotency-key"
        case .ifMatch: "if-match"
        case .ifNoneMatch: "if-none-match"
        case .ifUnmodifiedSince: "if-unmodified-since"
        case .contentType: "content-type"
        case .lastEventID: "last-event-id"
        case .contentLength: "content-length"
        case .transferEncoding: "transfer-encoding"
        case .connection: "connection"
        case .expect: "expect"
        }
    }

    /// The known field `bytes` name, compared ASCII case-insensitively. The length and the first
    /// byte pick the one candidate, so most names cost one switch and no comparison.
    public static func named(_ bytes: UnsafeBufferPointer<UInt8>) -> KnownHeader? {
        guard let first = bytes.first else { return nil }
        let candidate: KnownHeader
        switch (bytes.count, first | 0x20) {
        case (4, UInt8(ascii: "h")): candidate = .host
        case (6, UInt8(ascii: "o")): candidate = .origin
        case (6, UInt8(ascii: "e")): candidate = .expect
        case (8, UInt8(ascii: "i")): candidate = .ifMatch
        case (10, UInt8(ascii: "c")): candidate = .connection
        case (12, UInt8(ascii: "c")): candidate = .contentType
        case (13, UInt8(ascii: "a")): candidate = .authorization
        case (13, UInt8(ascii: "i")): candidate = .ifNoneMatch
        case (13, UInt8(ascii: "l")): candidate = .lastEventID
        case (14, UInt8(ascii: "c")): candidate = .contentLength
        case (15, UInt8(ascii: "i")): candidate = .idempotencyKey
        case (17, UInt8(ascii: "t")): candidate = .transferEncoding
        case (19, UInt8(ascii: "i")): candidate = .ifUnmodifiedSince
        default: return nil
        }
        return folds(bytes, to: candidate.lowercased) ? candidate : nil
    }

    /// Whether `bytes` are `lower` (of the same length, 4 bytes or more) but for case, compared a
    /// word at a time: setting bit 0x20 of every byte lowers a letter and leaves `-` and lower
    /// case alone; of the bytes a field name may hold (a token), only `^` and `_` change into
    /// something else, and no known name holds what they change into.
    private static func folds(_ bytes: UnsafeBufferPointer<UInt8>, to lower: StaticString) -> Bool {
        let (given, name, count) = (UnsafeRawPointer(bytes.baseAddress!), UnsafeRawPointer(lower.utf8Start), bytes.count)
        func same<Word: FixedWidthInteger>(_ offset: Int, _: Word.Type) -> Bool {
            given.loadUnaligned(fromByteOffset: offset, as: Word.self) | Word(truncatingIfNeeded: 0x2020_2020_2020_2020 as UInt64)
                == name.loadUnaligned(fromByteOffset: offset, as: Word.self)
        }
        if count < 8 { return same(0, UInt32.self) && same(count - 4, UInt32.self) }
        return same(0, UInt64.self) && same(count - 8, UInt64.self) && (count <= 16 || same(8, UInt64.self))
    }

    /// The known field `name` names, if any.
    public static func named(_ name: String) -> KnownHeader? {
        var name = name
        return name.withUTF8 { named($0) }
    }
}
