import ReceptionistWire
import Testing

@Suite struct HTTPStatusTests {
    /// Every error status the gateway answers with has a name of its own in the error vocabulary
    /// (the README's table): none falls back to the generic `error`, and no two share one.
    @Test func everyErrorStatusHasANameOfItsOwn() {
        let errors: [HTTPStatus] = [
            .badRequest, .unauthorized, .forbidden, .notFound, .methodNotAllowed, .requestTimeout, .conflict, .gone,
            .preconditionFailed, .payloadTooLarge, .upgradeRequired, .tooManyRequests, .headerFieldsTooLarge,
            .internalServerError, .notImplemented, .serviceUnavailable, .overCapacity, .insufficientStorage,
            .versionNotSupported,
        ]
        let names = errors.map(\.errorName)
        #expect(!names.contains("error"))
        #expect(Set(names).count == names.count)
        #expect(HTTPStatus.internalServerError.errorName == "internal_error")
    }
}
