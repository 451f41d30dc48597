/// The RPCs each WebSocket connection has under way at the backend: at most `limit` at once. The
/// next one waits, and the connection reads nothing more, until one of them is answered. So one
/// client's RPCs cannot take every hook call the gateway may make (`--hook-max-inflight`) and
/// queue ahead of everyone else's connects and subscribes; a client that sends faster than its
/// backend answers is slowed by TCP, as a reader is. Kept beside the sessions, as `OwedAnswers`
/// is: a connection with no RPC under way keeps no window.
///
/// Loop thread only.
final class RPCWindows {
    /// One connection's: its RPCs under way, and the one waiting for room.
    private final class Window {
        var inFlight = 0
        var waiting: (() -> Void)?
    }

    let limit: Int
    private var windows: [ObjectIdentifier: Window] = [:]

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Connections with an RPC under way now.
    var count: Int { windows.count }

    /// Whether `connection` may start an RPC now.
    func hasRoom(_ connection: AnyObject) -> Bool {
        (windows[ObjectIdentifier(connection)]?.inFlight ?? 0) < limit
    }

    /// Runs `start` once `connection` has room: now, or when one of its RPCs ends. One waits at
    /// most, as the connection reads nothing while it does.
    func whenRoom(_ connection: AnyObject, _ start: @escaping () -> Void) {
        guard let window = windows[ObjectIdentifier(connection)], window.inFlight >= limit else { return start() }
        precondition(window.waiting == nil, "a connection waits for room for one RPC at most")
        window.waiting = start
    }

    /// Counts an RPC `connection` starts. The function returned ends it: call it once, when its
    /// answer is written (or found nobody to go to); the RPC waiting for room, if any, starts then.
    func started(_ connection: AnyObject) -> () -> Void {
        let key = ObjectIdentifier(connection)
        let window: Window
        if let open = windows[key] {
            window = open
        } else {
            window = Window()
            windows[key] = window
        }
        window.inFlight += 1
        return { [weak self] in
            window.inFlight -= 1
            if let waiting = window.waiting {
                window.waiting = nil
                waiting()
            }
            // A connection closed and forgotten may have left its identity to a new one.
            if window.inFlight == 0, self?.windows[key] === window { self?.windows[key] = nil }
        }
    }

    /// `connection` is closed: its RPC waiting for room never starts.
    func forget(_ connection: AnyObject) {
        guard let window = windows.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        window.waiting = nil
    }
}
