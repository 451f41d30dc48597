import CCurl
import CLibUV

/// HTTP calls to other servers (the backend's hooks), made by libcurl's multi interface and
/// driven by this loop: libcurl says which sockets to watch and when its timer is due
/// (`CURLMOPT_SOCKETFUNCTION`, `CURLMOPT_TIMERFUNCTION`); the loop tells it what is ready
/// (`curl_multi_socket_action`). No thread waits and nothing blocks the loop; connections to a
/// host are kept alive and reused. HTTPS comes from libcurl.
///
/// How many calls run at once is the caller's business (`HookClient` bounds them); each call is
/// bounded by its own time-out and its answer by `maxResponseBytes`.
///
/// Loop thread only.
public final class HTTPClient {
    /// The most bytes of an answer that are kept; a larger one fails as `tooLarge`.
    public static let maxResponseBytes = 1 << 20

    private let loop: EventLoop
    private let multi: UnsafeMutableRawPointer
    private var timer: LoopTimer?
    /// A watch per socket libcurl has used: stopped, not closed, when it stops watching one (a
    /// kept-alive connection between calls), so the next call on it makes no handle. At most one
    /// per descriptor number.
    private var watches: [Int32: CurlSocketWatch] = [:]
    /// Easy handles of finished calls, reset, for the next calls: at most `maxIdleHandles`.
    private var idle: [UnsafeMutableRawPointer] = []
    private static let maxIdleHandles = 64
    private var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    private var closed = false

    /// One call under way: its easy handle, header list, answer so far and completion.
    private final class Transfer {
        let easy: UnsafeMutableRawPointer
        var headers: UnsafeMutablePointer<curl_slist>?
        var body: [UInt8] = []
        var tooLarge = false
        let completion: (OutboundResponse) -> Void

        init(easy: UnsafeMutableRawPointer, completion: @escaping (OutboundResponse) -> Void) {
            self.easy = easy
            self.completion = completion
        }
    }

    private static let initialised: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    public init(loop: EventLoop) {
        precondition(Self.initialised, "libcurl could not be initialised")
        self.loop = loop
        multi = curl_multi_init()!
        let context = Unmanaged.passUnretained(self).toOpaque()
        receptionist_curl_multi_callbacks(multi, { _, socket, action, context, _ in
            Unmanaged<HTTPClient>.fromOpaque(context!).takeUnretainedValue().curlWantsSocket(socket, action: action)
            return 0
        }, { _, timeout, context in
            Unmanaged<HTTPClient>.fromOpaque(context!).takeUnretainedValue().curlWantsTimer(timeout)
            return 0
        }, context)
        timer = LoopTimer(loop: loop) { [unowned self] in self.socketReady(CURL_SOCKET_BAD, flags: 0) }
    }

    /// Calls are under way.
    public var inFlight: Int { transfers.count }

    /// Posts `request`; `completion` runs on the loop, once, with the answer or the failure.
    public func post(_ request: OutboundRequest, completion: @escaping (OutboundResponse) -> Void) {
        guard !closed, let easy = idle.popLast() ?? curl_easy_init() else { return completion(.failed(.cancelled)) }
        let transfer = Transfer(easy: easy, completion: completion)
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        receptionist_curl_easy_string(easy, CURLOPT_URL, request.url)
        receptionist_curl_easy_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        receptionist_curl_easy_long(easy, CURLOPT_NOSIGNAL, 1)
        // Trust anchors from the system's bundle alone, not also its directory: libcurl then
        // keeps the store it builds from the bundle for every later connection (its CA cache,
        // which a directory rules out). Built for each new TLS connection, it took 5-8 ms of the
        // loop each, and a burst of calls to an https hook held every client.
        _ = receptionist_curl_easy_pointer(easy, CURLOPT_CAPATH, nil)
        // A transfer that times out while its host name is still being looked up leaves the
        // resolver's thread to finish on its own, rather than join it here, on the loop: with slow
        // DNS the join held every client for seconds.
        receptionist_curl_easy_long(easy, CURLOPT_QUICK_EXIT, 1)
        receptionist_curl_easy_long(easy, CURLOPT_TIMEOUT_MS, Int(clamping: request.timeoutMilliseconds))
        receptionist_curl_easy_long(easy, CURLOPT_POSTFIELDSIZE, request.body.count)
        request.body.withUnsafeBytes { bytes in
            // Copied by libcurl: the request's bytes may go once this returns.
            _ = receptionist_curl_easy_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
        }
        // No `Expect: 100-continue` round trip for a larger body.
        for line in request.headers + ["Expect:"] {
            transfer.headers = curl_slist_append(transfer.headers, line)
        }
        receptionist_curl_easy_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(transfer.headers))
        receptionist_curl_easy_pointer(easy, CURLOPT_PRIVATE, context)
        receptionist_curl_easy_pointer(easy, CURLOPT_WRITEDATA, context)
        receptionist_curl_easy_write_function(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard transfer.body.count + length <= HTTPClient.maxResponseBytes else {
                transfer.tooLarge = true
                return 0  // libcurl ends the transfer with CURLE_WRITE_ERROR
            }
            if let data { transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
            return length
        }
        transfers[easy] = transfer
        curl_multi_add_handle(multi, easy)
    }

    /// Ends every call under way (each is told `cancelled`) and frees libcurl's state.
    public func close() {
        guard !closed else { return }
        closed = true
        let pending = Array(transfers.values)
        for transfer in pending { finish(transfer) }
        for transfer in pending { transfer.completion(.failed(.cancelled)) }
        curl_multi_cleanup(multi)
        for watch in watches.values { watch.close() }
        watches.removeAll()
        for easy in idle { curl_easy_cleanup(easy) }
        idle.removeAll()
        timer?.close()
        timer = nil
    }

    // MARK: libcurl's side

    private func curlWantsSocket(_ socket: Int32, action: Int32) {
        if action == CURL_POLL_REMOVE {
            watches[socket]?.stop()
            return
        }
        if watches[socket] == nil {
            guard let watch = CurlSocketWatch(loop: loop, socket: socket, client: self) else { return }
            watches[socket] = watch
        }
        watches[socket]!.watch(action)
    }

    private func curlWantsTimer(_ milliseconds: Int) {
        guard milliseconds >= 0 else { return timer?.stop() ?? () }
        // Never called into libcurl from its own callback: a due timer fires on the next turn.
        timer?.start(delayMilliseconds: UInt64(milliseconds))
    }

    /// The loop saw `socket` ready (or libcurl's timer fire, for `CURL_SOCKET_BAD`).
    func socketReady(_ socket: Int32, flags: Int32) {
        guard !closed else { return }
        var running: Int32 = 0
        curl_multi_socket_action(multi, socket, flags, &running)
        var done: [(Transfer, OutboundResponse)] = []
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                  let transfer = transfers[easy] else { continue }
            done.append((transfer, outcome(transfer, receptionist_curl_message_result(message))))
        }
        // Completions run once libcurl is done with their handles: one may post the next call.
        for (transfer, _) in done { finish(transfer) }
        for (transfer, response) in done { transfer.completion(response) }
    }

    private func outcome(_ transfer: Transfer, _ result: CURLcode) -> OutboundResponse {
        if result == CURLE_OK { return .answered(status: receptionist_curl_easy_status(transfer.easy), body: transfer.body) }
        if transfer.tooLarge { return .failed(.tooLarge) }
        if result == CURLE_OPERATION_TIMEDOUT { return .failed(.timedOut) }
        return .failed(.transport(String(cString: curl_easy_strerror(result))))
    }

    private func finish(_ transfer: Transfer) {
        transfers.removeValue(forKey: transfer.easy)
        curl_multi_remove_handle(multi, transfer.easy)
        if closed || idle.count >= Self.maxIdleHandles {
            curl_easy_cleanup(transfer.easy)
        } else {
            curl_easy_reset(transfer.easy)
            idle.append(transfer.easy)
        }
        curl_slist_free_all(transfer.headers)
        transfer.headers = nil
    }
}
