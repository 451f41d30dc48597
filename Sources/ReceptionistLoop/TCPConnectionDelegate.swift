/// What a connection tells its session. Every call is on the loop thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// Bytes arrived. They live in the loop's shared read buffer and are valid only during the call.
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer)
    /// The peer finished sending (EOF). The connection is still open for writing.
    func connectionDidReadEOF(_ connection: TCPConnection)
    /// The outbound queue fell to zero after it had passed `highWaterBytes`.
    func connectionDidDrain(_ connection: TCPConnection)
    /// The socket is closed and its memory released; the connection is finished.
    func connectionDidClose(_ connection: TCPConnection)
}
