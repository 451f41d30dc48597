/// A fuzz input read as a few leading control bytes (which choose limits and how to split the
/// rest) followed by the stream the codec is fed.
///
/// Deriving the choices from the input keeps every run reproducible from the saved input alone,
/// and lets libFuzzer mutate the split as it mutates the bytes.
public struct FuzzInput {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    public init(_ data: UnsafePointer<UInt8>?, _ size: Int) {
        bytes = UnsafeBufferPointer(start: size > 0 ? data : nil, count: size)
    }

    /// The next control byte, or 0 once the input is used up.
    public mutating func takeByte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    /// Everything after the control bytes taken so far.
    public var rest: [UInt8] { Array(bytes[index...]) }
}

/// Cuts a stream into consecutive, non-empty pieces in one of four ways chosen by `seed`: a byte
/// at a time, fixed-size pieces, pseudo-random sizes, or two halves at a chosen point.
public func fuzzPieces(_ stream: [UInt8], seed: UInt8) -> [ArraySlice<UInt8>] {
    guard !stream.isEmpty else { return [] }
    let parameter = Int(seed >> 2)
    let sizes: (inout UInt32) -> Int
    switch seed & 3 {
    case 0:
        sizes = { _ in 1 }
    case 1:
        sizes = { _ in parameter + 1 }
    case 2:
        // xorshift32: sizes from 1 to parameter + 2, different on every piece.
        sizes = { state in
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            return Int(state % UInt32(parameter + 2)) + 1
        }
    default:
        let cut = max(1, stream.count * parameter / 64)
        sizes = { state in
            defer { state = 0 }
            return state == 0 ? Int.max : cut
        }
    }
    var state = UInt32(seed) | 0x9E37_0000
    var pieces: [ArraySlice<UInt8>] = []
    var start = 0
    while start < stream.count {
        let end = start + min(sizes(&state), stream.count - start)
        pieces.append(stream[start..<end])
        start = end
    }
    return pieces
}
