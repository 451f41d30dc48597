import Testing
@testable import ReceptionistWire

@Suite struct WebSocketCloseCodeTests {
    @Test(arguments: [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999] as [UInt16])
    func validCodes(_ code: UInt16) {
        #expect(WebSocketCloseCode.isValidOnTheWire(code))
    }

    @Test(arguments: [0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] as [UInt16])
    func invalidCodes(_ code: UInt16) {
        #expect(!WebSocketCloseCode.isValidOnTheWire(code))
    }

    @Test func namedCodesAreTheRegisteredOnes() {
        #expect(
            [
                WebSocketCloseCode.normal, WebSocketCloseCode.goingAway, WebSocketCloseCode.protocolError,
                WebSocketCloseCode.unsupportedData, WebSocketCloseCode.invalidPayload, WebSocketCloseCode.policyViolation,
                WebSocketCloseCode.messageTooBig, WebSocketCloseCode.tryAgainLater,
            ] == [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1013])
    }
}
