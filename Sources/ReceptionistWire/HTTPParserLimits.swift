/// Size limits enforced while parsing, in bytes.
public struct HTTPParserLimits: Sendable, Hashable {
    /// Request line plus header fields, per request.
    public var maxHeadBytes: Int
    /// Decoded body, per request.
    public var maxBodyBytes: Int

    public init(maxHeadBytes: Int = 16 * 1024, maxBodyBytes: Int = 1024 * 1024) {
        self.maxHeadBytes = maxHeadBytes
        self.maxBodyBytes = maxBodyBytes
    }
}
