import CLibUV

/// A libuv call that failed, with the operation that was attempted.
public struct LoopError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    public var name: String { String(cString: uv_err_name(code)) }
    public var description: String { "\(operation): \(String(cString: uv_strerror(code))) (\(name))" }

    /// Throws when `code` is a libuv error (negative).
    static func check(_ code: Int32, _ operation: @autoclosure () -> String) throws(LoopError) {
        if code < 0 { throw LoopError(code: code, operation: operation()) }
    }
}
