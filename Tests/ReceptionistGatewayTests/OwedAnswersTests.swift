@testable import ReceptionistGateway
import Testing

/// A connection's close waits for the answers it owes, and for nothing else (invariant 64).
@Suite struct OwedAnswersTests {
    private final class Connection {}

    @Test func aCloseWaitsForTheLastAnswerOwed() {
        let owed = OwedAnswers()
        let connection = Connection()
        let first = owed.owe(connection), second = owed.owe(connection)
        var closed = 0
        owed.whenSettled(connection) { closed += 1 }
        first()
        #expect(closed == 0, "an answer is still owed")
        second()
        #expect(closed == 1)
        #expect(owed.count == 0, "a connection that owes nothing keeps no account")
    }

    @Test func aConnectionThatOwesNothingClosesAtOnce() {
        let owed = OwedAnswers()
        let connection = Connection()
        owed.owe(connection)()
        var closed = false
        owed.whenSettled(connection) { closed = true }
        #expect(closed)
    }

    @Test func anAnswerOfAForgottenConnectionNeitherClosesNorTouchesAnother() {
        let owed = OwedAnswers()
        let gone = Connection(), other = Connection()
        let late = owed.owe(gone)
        var goneClosed = false
        owed.whenSettled(gone) { goneClosed = true }
        owed.forget(gone)
        let otherAnswer = owed.owe(other)
        late()
        #expect(!goneClosed, "a connection closed meanwhile has nobody to close")
        var otherClosed = false
        owed.whenSettled(other) { otherClosed = true }
        #expect(!otherClosed, "another connection's account is its own")
        otherAnswer()
        #expect(otherClosed)
    }
}
