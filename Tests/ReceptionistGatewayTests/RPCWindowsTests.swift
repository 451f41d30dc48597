@testable import ReceptionistGateway
import Testing

/// A connection has at most `limit` RPCs under way; the next waits for one of them to end.
@Suite struct RPCWindowsTests {
    private final class Connection {}

    @Test func theNextRPCWaitsForRoomAndStartsWhenOneEnds() {
        let windows = RPCWindows(limit: 2)
        let connection = Connection(), other = Connection()
        let first = windows.started(connection)
        let second = windows.started(connection)
        #expect(!windows.hasRoom(connection))
        #expect(windows.hasRoom(other), "one connection's window is its own")
        var third: (() -> Void)?
        windows.whenRoom(connection) { third = windows.started(connection) }
        #expect(third == nil, "no room until one ends")
        second()
        #expect(third != nil, "started as soon as one ended")
        #expect(!windows.hasRoom(connection), "the one that waited took the room")
        first()
        third?()
        #expect(windows.hasRoom(connection))
        #expect(windows.count == 0, "a connection with nothing under way keeps no window")
    }

    @Test func roomNowStartsAtOnce() {
        let windows = RPCWindows(limit: 1)
        let connection = Connection()
        var started = false
        windows.whenRoom(connection) { started = true }
        #expect(started)
    }

    @Test func aForgottenConnectionsWaitingRPCNeverStartsAndItsEndsTouchNoOther() {
        let windows = RPCWindows(limit: 1)
        let gone = Connection(), other = Connection()
        let late = windows.started(gone)
        var started = false
        windows.whenRoom(gone) { started = true }
        windows.forget(gone)
        let otherEnd = windows.started(other)
        late()
        #expect(!started, "a connection closed meanwhile starts nothing")
        #expect(!windows.hasRoom(other), "the other connection's RPC is still counted")
        otherEnd()
        #expect(windows.count == 0)
    }
}
