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
    func closeWhenAnswered(stoppingPushes: Bool = false, _ close: @escaping () -> Void) {
        connection.stopReading()
        services.owedAnswers.whenSettled(connection, stoppingPushes: stoppingPushes, close: close)
    }

    /// Sends our close frame once every answer owed is written (a drain, an expired grant, a
    /// slow consumer, which gets nothing else meanwhile: `stoppingPushes`). Nothing is read
    /// meanwhile, so nothing more is asked; then reading resumes, for the peer's answer to the
    /// close (whatever else it sends is not acted on, invariant 22).
    func closeAfterAnswers(code: UInt16, reason: String, stoppingPushes: Bool = false) {
        closeWhenAnswered(stoppingPushes: stoppingPushes) { [weak self] in
            guard let self, connection.state == .open else { return }
            close(code: code, reason: reason)
            connection.startReading()
        }
    }

    /// Whether the connection is closing: its close frame sent, or waiting for its answers.
    var isClosing: Bool { state.closeSent || services.owedAnswers.isClosing(connection) }
}
