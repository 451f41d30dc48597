@testable import ReceptionistGateway
import Testing

@Suite struct DiskTopicNumbersTests {
    @Test func numbersFollowTheLastHandedOutThenTheLastStored() {
        var numbers = DiskTopicNumbers()
        #expect(numbers.next(after: 4).seq == 5)
        #expect(numbers.next(after: 4).seq == 6)
        numbers.answered(run: 0, failed: false, stored: 5)
        numbers.answered(run: 0, failed: false, stored: 6)
        #expect(numbers.isIdle)
        #expect(numbers.next(after: 6).seq == 7)
    }

    /// 5 and 6 wait; 5 is refused, so numbering starts again at 5, and 5 is handed out anew. 6's
    /// refusal, of the run before, then starts nothing: the next message is 6, not 5 a third
    /// time (which the disk would refuse, as 5 is being stored by then).
    @Test func aRefusalOfTheRunBeforeStartsNoNewRun() {
        var numbers = DiskTopicNumbers()
        let five = numbers.next(after: 4), six = numbers.next(after: 4)
        #expect((five.seq, six.seq) == (5, 6))
        numbers.answered(run: five.run, failed: true, stored: 4)
        let again = numbers.next(after: 4)
        #expect(again.seq == 5 && again.run != five.run)
        numbers.answered(run: six.run, failed: true, stored: 4)
        let next = numbers.next(after: 4)
        #expect(next.seq == 6 && next.run == again.run)
        numbers.answered(run: again.run, failed: false, stored: 5)
        numbers.answered(run: next.run, failed: false, stored: 6)
        #expect(numbers.isIdle)
        #expect(numbers.next(after: 6).seq == 7)
    }

    /// A refusal with nothing else waiting leaves numbering to the topic's last stored number.
    @Test func aLoneRefusalNumbersFromTheLastStored() {
        var numbers = DiskTopicNumbers()
        let five = numbers.next(after: 4)
        numbers.answered(run: five.run, failed: true, stored: 4)
        #expect(numbers.isIdle)
        #expect(numbers.next(after: 4).seq == 5)
    }
}
