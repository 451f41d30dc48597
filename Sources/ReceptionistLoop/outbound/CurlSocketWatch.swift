import CCurl
import CLibUV

/// A libuv poll handle on a socket libcurl opened: it tells the client when the socket is ready
/// for what libcurl asked. libcurl owns the socket, so closing the watch never closes it.
///
/// Loop thread only.
final class CurlSocketWatch: LoopHandle {
    let socket: Int32
    /// Not counted: the client closes every watch before it goes (`close`, `CURL_POLL_REMOVE`).
    private unowned(unsafe) let client: HTTPClient

    /// Nil if libuv cannot watch the socket.
    init?(loop: EventLoop, socket: Int32, client: HTTPClient) {
        self.socket = socket
        self.client = client
        super.init(loop: loop, type: UV_POLL)
        guard uv_poll_init_socket(loop.raw, poll, socket) == 0 else {
            discard()
            return nil
        }
        adopt()
    }

    /// Watches for what libcurl asked: `CURL_POLL_IN`, `CURL_POLL_OUT` or both.
    func watch(_ action: Int32) {
        guard !isClosing else { return }
        var events: Int32 = 0
        if action & CURL_POLL_IN != 0 { events |= Int32(UV_READABLE.rawValue) }
        if action & CURL_POLL_OUT != 0 { events |= Int32(UV_WRITABLE.rawValue) }
        uv_poll_start(poll, events) { handle, status, events in
            guard let watch = LoopHandle.owner(UnsafeMutableRawPointer(handle), as: CurlSocketWatch.self) else { return }
            var flags: Int32 = 0
            if status < 0 {
                flags = CURL_CSELECT_ERR
            } else {
                if events & Int32(UV_READABLE.rawValue) != 0 { flags |= CURL_CSELECT_IN }
                if events & Int32(UV_WRITABLE.rawValue) != 0 { flags |= CURL_CSELECT_OUT }
            }
            watch.client.socketReady(watch.socket, flags: flags)
        }
    }

    /// libcurl no longer watches the socket (it may close it, or keep it for the next call).
    func stop() {
        guard !isClosing else { return }
        uv_poll_stop(poll)
    }

    override func willClose() {
        uv_poll_stop(poll)
    }
}
