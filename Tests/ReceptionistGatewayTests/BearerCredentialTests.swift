@testable import ReceptionistGateway
import Testing

/// `Authorization: Bearer <credential>` as RFC 9110 section 11.4 writes it: the scheme in any
/// case, then one or more spaces.
@Suite struct BearerCredentialTests {
    @Test func theCredentialFollowsOneOrMoreSpaces() {
        #expect(AccessControl.bearer("Bearer abc.def") == "abc.def")
        #expect(AccessControl.bearer("bearer   abc") == "abc")
        #expect(AccessControl.bearer("BEARER abc") == "abc")
    }

    @Test func anotherSchemeOrNoCredentialIsNone() {
        for header in [nil, "", "Bearer", "Bearer ", "Bearer   ", "Basic abc", "Bearerabc"] {
            #expect(AccessControl.bearer(header) == nil, "\(header ?? "nil")")
        }
    }
}
