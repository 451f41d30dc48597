import Glibc
import ReceptionistLoop
import ReceptionistWire

/// The Redis keys and channel of one cluster. A store's keys share the hash tag `{store}`, and a
/// topic's `{topic}`, so that each store or topic lives in one Redis Cluster slot.
///
/// Pure value.
struct ClusterKeys: Sendable {
    /// Pub/sub is not scoped by database, so the channel names it.
    let channel: String
    let stores = "rcpt:stores"
    /// The name of the server's present life (`RedisLife`), and the run of the server it was
    /// last confirmed on.
    let life = "rcpt:life"
    let run = "rcpt:run"

    init(database: Int) {
        channel = "rcpt:events:\(database)"
    }

    /// A node's own channel: where the other nodes' publishes are noticed, so that a node is never
    /// told of its own (`ClusterScripts.publish`). The channel's name and a colon come first, and
    /// hold no glob character, so `PUBSUB CHANNELS <channel>:*` lists every node's. `m:` after
    /// them (`carryingMark`) tells the script that this node reads notices that carry their
    /// messages; a node of an earlier version, whose channel lacks it, is sent the bare notice.
    func nodeChannel(_ node: String) -> String { "\(channel):\(Self.carryingMark)\(node)" }
    static let carryingMark = "m:"

    func storeVersion(_ store: String) -> String { "rcpt:s:{\(store)}:version" }
    func storeModels(_ store: String) -> String { "rcpt:s:{\(store)}:models" }
    func storeLog(_ store: String) -> String { "rcpt:s:{\(store)}:log" }
    /// The store's epoch, made with it (or by the first snapshot that finds none).
    func storeEpoch(_ store: String) -> String { "rcpt:s:{\(store)}:epoch" }
    func topicSeq(_ topic: String) -> String { Self.topicPrefix + topic + Self.seqSuffix }
    func topicLog(_ topic: String) -> String { Self.topicPrefix + topic + Self.logSuffix }
    /// The topic's epoch: made by the first write or read that finds none, so a topic whose keys
    /// were lost (Redis restarted empty, `FLUSHALL`) gets a new one.
    func topicEpoch(_ topic: String) -> String { Self.topicPrefix + topic + Self.epochSuffix }
    /// The ID of the last entry the publish script appended to the topic's log: the entry a
    /// batch follows, for the nodes to check it is the one they read last (a string key, where
    /// reading the log's newest entry made Redis build the whole entry on every call).
    func topicLast(_ topic: String) -> String { Self.topicPrefix + topic + Self.lastSuffix }
    private static let topicPrefix = "rcpt:t:{"
    private static let seqSuffix = "}:seq"
    private static let logSuffix = "}:log"
    private static let epochSuffix = "}:epoch"
    private static let lastSuffix = "}:last"

    /// The topic's seq, log, epoch and last-entry keys, appended to a command's arguments as they
    /// are written, with no `String` made for each (a publish batch names them on every call).
    func appendTopicKeys(_ topic: String, to arguments: inout RedisArguments) {
        arguments.append(Self.topicPrefix, topic, Self.seqSuffix)
        arguments.append(Self.topicPrefix, topic, Self.logSuffix)
        arguments.append(Self.topicPrefix, topic, Self.epochSuffix)
        arguments.append(Self.topicPrefix, topic, Self.lastSuffix)
    }
    /// Each node's share of a topic's or store's presence: a hash of entries by node.
    func presence(_ target: StreamTarget) -> String {
        switch target {
        case .topic(let name): "rcpt:p:{\(name)}:t"
        case .store(let name): "rcpt:p:{\(name)}:s"
        }
    }
    /// Every node's last heartbeat on this server, scored by Redis's clock in milliseconds.
    let nodes = "rcpt:nodes"
    /// An idempotency key's entry, by scope (an API key's digest) and key.
    func idempotencyEntry(scope: String, key: String) -> String { "rcpt:i:\(scope):\(key)" }
    /// Every idempotency entry, scored by when it was first used, for the bound on their number.
    var idempotencyEntries: String { "rcpt:i" }

    /// Notifications on `channel`: a kind letter, a colon, and the store or topic name; a
    /// topic's then carries the message's number, epoch and entry ID (`t:news:42:5c1e…:1700…-0`,
    /// added by the publish script), so a node that has the message already need not read the log
    /// for it. Names never hold a colon.
    enum Notice: Equatable {
        case storeCreated(String)
        case storeChanged(String)
        /// The store was deleted in the epoch named (`d:orders:5c1e…`): a node drops its replica
        /// only if it is that store, not one made again since under the name.
        case storeDeleted(String, epoch: String)
        /// The entry ID is nil from a node of an earlier version, whose notice names none (and
        /// from the `topicTail` script's notice of a new epoch).
        case topicPublished(String, seq: UInt64? = nil, epoch: String? = nil, id: String? = nil)
        /// A topic's notice that carries the call's messages to the topic, numbered, so that a
        /// node that has every message before them mirrors them with no read (`m:`, made by the
        /// publish script: `m:<name>:<last>:<epoch>:<last entry ID>:<count>`, then for each message
        /// `:<publishedAt>:<length>:<data>`, then `:<the entry ID before them>`; a node of an
        /// earlier version takes it for the bare notice, and reads).
        case topicCarried(String, messages: [PublishBatch.Message], numbered: PublishBatch.Numbered)
        /// A node's presence entry for a topic or store changed: `p:<node>:t:<topic>` (or `s:`).
        case presenceChanged(StreamTarget, node: String)
    }

    /// What a topic's notice starts with; the publish script appends the message's number and epoch.
    static let topicNoticePrefix = "t:"

    static func encode(_ notice: Notice) -> String {
        switch notice {
        case .storeCreated(let name): "n:\(name)"
        case .storeChanged(let name): "s:\(name)"
        case .storeDeleted(let name, let epoch): "d:\(name):\(epoch)"
        case .topicPublished(let name, let seq?, let epoch?, let id?): "\(topicNoticePrefix)\(name):\(seq):\(epoch):\(id)"
        case .topicPublished(let name, let seq?, let epoch?, nil): "\(topicNoticePrefix)\(name):\(seq):\(epoch)"
        case .topicPublished(let name, _, _, _): topicNoticePrefix + name
        case .topicCarried(let name, let messages, let numbered):
            "m:\(name):\(numbered.first + UInt64(messages.count) - 1):\(numbered.epoch):\(numbered.lastID):\(messages.count)"
                + messages.map { ":\($0.publishedAt):\($0.data.count):\(String(decoding: $0.data, as: UTF8.self))" }.joined()
                + (numbered.previousID.map { ":\($0)" } ?? "")
        case .presenceChanged(.topic(let name), let node): "p:\(node):t:\(name)"
        case .presenceChanged(.store(let name), let node): "p:\(node):s:\(name)"
        }
    }

    static func decode(_ payload: [UInt8]) -> Notice? {
        guard payload.count > 2, payload[1] == UInt8(ascii: ":") else { return nil }
        var name: String { String(decoding: payload[2...], as: UTF8.self) }
        switch payload[0] {
        case UInt8(ascii: "n"): return .storeCreated(name)
        case UInt8(ascii: "s"): return .storeChanged(name)
        case UInt8(ascii: "d"):
            let parts = name.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty else { return nil }
            return .storeDeleted(String(parts[0]), epoch: String(parts[1]))
        case UInt8(ascii: "t"):
            // `name:seq:epoch:id` (or `name:seq:epoch`), read from the bytes: one comes for every
            // call that publishes, and a `String` split walks characters.
            let colon = UInt8(ascii: ":")
            guard let first = payload[2...].firstIndex(of: colon), let second = payload[(first + 1)...].firstIndex(of: colon),
                  second + 1 < payload.count, let seq = DecimalDigits.value(payload[(first + 1)..<second])
            else { return .topicPublished(name) }
            let third = payload[(second + 1)...].firstIndex(of: colon)
            let epochEnd = third ?? payload.count
            guard epochEnd > second + 1 else { return .topicPublished(name) }
            var id: String?
            if let third {
                let idBytes = payload[(third + 1)...]
                guard !idBytes.contains(colon), DecimalDigits.pair(idBytes, separator: UInt8(ascii: "-")) != nil else {
                    return .topicPublished(name)
                }
                id = String(decoding: idBytes, as: UTF8.self)
            }
            return .topicPublished(
                String(decoding: payload[2..<first], as: UTF8.self), seq: seq,
                epoch: String(decoding: payload[(second + 1)..<epochEnd], as: UTF8.self), id: id)
        case UInt8(ascii: "m"):
            return carried(payload)
        case UInt8(ascii: "p"):
            let parts = name.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[0].isEmpty, !parts[2].isEmpty else { return nil }
            switch parts[1] {
            case "t": return .presenceChanged(.topic(String(parts[2])), node: String(parts[0]))
            case "s": return .presenceChanged(.store(String(parts[2])), node: String(parts[0]))
            default: return nil
            }
        default: return nil
        }
    }

    /// An `m:` notice read from its bytes. One whose messages cannot be read whole is taken for the
    /// bare notice of its last number and epoch, so the node reads the log for them; one whose
    /// head cannot be read is nobody's.
    ///
    /// Read through a pointer, each field found with `memchr`: one comes for every call that
    /// publishes, to every other node.
    private static func carried(_ payload: [UInt8]) -> Notice? {
        payload.withUnsafeBufferPointer(carried)
    }

    private static func carried(_ payload: UnsafeBufferPointer<UInt8>) -> Notice? {
        guard let base = payload.baseAddress else { return nil }
        let colon = UInt8(ascii: ":")
        var at = 2
        /// The bytes up to the next colon, which is passed over.
        func field() -> Slice<UnsafeBufferPointer<UInt8>>? {
            guard at < payload.count, let found = memchr(base + at, Int32(colon), payload.count - at) else { return nil }
            let end = at + UnsafeRawPointer(base + at).distance(to: UnsafeRawPointer(found))
            defer { at = end + 1 }
            return payload[at..<end]
        }
        func text(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes), as: UTF8.self)
        }
        guard let nameBytes = field(), !nameBytes.isEmpty, let last = field().flatMap(DecimalDigits.value),
              let epochBytes = field(), !epochBytes.isEmpty, let lastID = field(), DecimalDigits.pair(lastID, separator: UInt8(ascii: "-")) != nil,
              let count = field().flatMap(DecimalDigits.value), count >= 1, count <= last
        else { return nil }
        let name = text(nameBytes)
        let epoch = text(epochBytes)
        let bare = Notice.topicPublished(name, seq: last, epoch: epoch, id: text(lastID))
        // The colon after the count began the first message.
        at -= 1
        var messages: [PublishBatch.Message] = []
        messages.reserveCapacity(Int(min(count, UInt64(PublishBatch.maxMessages))))
        for _ in 0..<count {
            guard at < payload.count, payload[at] == colon else { return bare }
            at += 1
            guard let publishedAt = field().flatMap(DecimalDigits.value), let length = field().flatMap(DecimalDigits.value),
                  length <= UInt64(payload.count - at)
            else { return bare }
            let end = at + Int(length)
            messages.append(PublishBatch.Message(topic: name, data: Array(UnsafeBufferPointer(rebasing: payload[at..<end])), publishedAt: publishedAt))
            at = end
        }
        // Then the ID of the entry before them, from a node of this version.
        var previousID: String?
        if at < payload.count {
            guard payload[at] == colon else { return bare }
            let rest = payload[(at + 1)...]
            guard DecimalDigits.pair(rest, separator: UInt8(ascii: "-")) != nil else { return bare }
            previousID = text(rest)
        }
        return .topicCarried(
            name, messages: messages,
            numbered: PublishBatch.Numbered(first: last - count + 1, epoch: epoch, lastID: text(lastID), previousID: previousID))
    }
}
