/// A connection's close waits for the answers it owes (`OwedAnswers`, invariant 64).
extension WebSocketSession {
    /// Counts an answer this connection owes until the function returned is called: once, after
    /// the answer is written or found the connection gone. Only answers that come later are
    /// counted; one written before its request is handled needs nothing.
    func owing() -> () -> Void {
        services.owedAnswers.owe(connection)
    }

    /// Runs `close` once every answer owed is written: now if none is. Nothing more is read
    /// meanwhile (the peer's close frame, or a frame that broke the protocol, was its last).
    func closeWhenAnswered(_ close: @escaping () -> Void) {
        connection.stopReading()
        services.owedAnswers.whenSettled(connection, close: close)
    }
}
