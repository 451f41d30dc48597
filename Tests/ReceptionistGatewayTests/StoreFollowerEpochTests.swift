@testable import ReceptionistGateway
import Testing

/// The epoch a store Redis lost moves to: the same on every node, never the one it left.
@Suite struct StoreFollowerEpochTests {
    @Test func theEpochOfALostStoreIsMadeFromTheOneItLeft() {
        let left = "0123456789abcdef"
        let lost = StoreFollower.lostEpoch(after: left)
        #expect(lost == StoreFollower.lostEpoch(after: left))
        #expect(lost != left)
        #expect(lost.utf8.count == 16 && lost.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) })
        #expect(StoreFollower.lostEpoch(after: "fedcba9876543210") != lost)
        // Lost again after being made again elsewhere: another epoch again.
        #expect(StoreFollower.lostEpoch(after: lost) != lost)
    }
}
