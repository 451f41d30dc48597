import ReceptionistModel

/// A Redis server's life: a name kept in the server (`ClusterKeys.life`) that changes when the
/// server may have come back with older data, and that every epoch made on the server starts
/// with (`<life>.<random>`). A server started again (another run id) that does not keep every
/// write (AOF with `appendfsync always`) may have lost the last ones, and no node can tell which
/// topics and stores went back: one that no node had read past the loss (a node started after
/// it) would number on in the old epoch, giving numbers out a second time. So the first node to
/// connect to the new run names a new life (`ClusterScripts.life`), and every script that
/// numbers or reads a topic or store takes an epoch of an earlier life as one to renew: the
/// topic or store moves to a new epoch at its next touch, and every subscriber is reset.
///
/// Loop thread only.
final class RedisLife {
    /// The present life's name on this server, as this node last learned it; "" before it asked
    /// (its epochs are then made without one).
    private(set) var name = ""

    /// An epoch for something new on this server, of its present life.
    func freshEpoch() -> String {
        name.isEmpty ? ModelStore.newEpoch() : name + "." + ModelStore.newEpoch()
    }

    func learn(_ name: String) {
        self.name = name
    }

    /// A name for a new life: short, so that an epoch stays well within the 64 bytes a client may
    /// send back.
    static func newName() -> String {
        let hex = String(UInt32.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// The run id in the text of `INFO server`, or nil.
    static func runID(inInfo text: String) -> String? {
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("run_id:") {
            return String(line.dropFirst(7))
        }
        return nil
    }

    /// Whether the server keeps every write it answers (`CONFIG GET append*`'s name and value
    /// pairs): AOF on, synced on every write.
    static func keepsEveryWrite(config pairs: [String]) -> Bool {
        var values: [String: String] = [:]
        var index = 0
        while index + 1 < pairs.count {
            values[pairs[index]] = pairs[index + 1]
            index += 2
        }
        return values["appendonly"] == "yes" && values["appendfsync"] == "always"
    }
}
