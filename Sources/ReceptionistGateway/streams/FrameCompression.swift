import ReceptionistWire

/// The zlib streams every WebSocket session of the loop shares for permessage-deflate. Each is
/// reset after every message (no context takeover either way, `PerMessageDeflate`), so one
/// inflater takes every client's compressed messages and one compressor per window size makes
/// every broadcast's compressed frame once, shared by all its subscribers (invariant 35).
///
/// Loop thread only.
final class FrameCompression {
    /// Frames shorter than this go uncompressed: below it zlib saves too little to pay for itself.
    let minBytes: Int
    let inflater = ZlibStream(.inflate)
    /// Indexed by window bits (9...15), made on first use: nearly every client takes 15.
    private var compressors: [ZlibStream?] = Array(repeating: nil, count: 16)

    /// zlib's default level: the compression is paid once per broadcast, not once per subscriber.
    static let level = 6

    init(minBytes: Int) {
        self.minBytes = minBytes
    }

    func compressor(windowBits: Int) -> ZlibStream {
        if let compressor = compressors[windowBits] { return compressor }
        let compressor = ZlibStream(.deflate(windowBits: windowBits, level: Self.level))
        compressors[windowBits] = compressor
        return compressor
    }
}
