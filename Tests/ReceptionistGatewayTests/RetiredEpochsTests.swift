@testable import ReceptionistGateway
import Testing

@Suite struct RetiredEpochsTests {
    @Test func theEpochSeenGoingBackAndTheLastFewLeftAreListedForTheScripts() {
        var retired = RetiredEpochs()
        #expect(retired.list == "")
        retired.wentBack = "e1"
        #expect(retired.list == "e1")
        for epoch in ["e1", "e2", "e3", "e4", "e5", "e3"] { retired.leave(epoch) }
        // Each once, the most recent last, at most `kept` of them.
        #expect(retired.leftBehind == ["e2", "e4", "e5", "e3"])
        #expect(retired.list == "e1,e2,e4,e5,e3")
        #expect(retired.left("e3") && !retired.left("e1"))
        retired.wentBack = nil
        #expect(retired.list == "e2,e4,e5,e3")
    }
}
