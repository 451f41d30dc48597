import ReceptionistLoop
import ReceptionistModel

/// Commits to stores on one Redis server gathered in one loop iteration, laid out for one call of
/// `ClusterScripts.commit`, which runs them in the order they came, each exactly as it would run
/// alone: a store's commit still checks the version it was computed against, so two commits to
/// one store in a batch are what two calls in a row were (the second one conflicts), and commits
/// to other stores have no order to keep.
///
/// Bounded (`maxCommits`, `maxBytes`) so that one script never holds Redis for long.
///
/// Pure value.
struct CommitBatch: ScriptBatch {
    /// Commits one script call takes at most: a publish batch's bound (`PublishBatch.maxMessages`),
    /// so that a commit call holds Redis no longer than a publish call does.
    static let maxCommits = 32
    static var capacity: Int { maxCommits }
    /// Bytes of entries and models one script call takes at most (a batch always takes its first).
    static let maxBytes = 1 << 20

    struct Commit {
        let store: String
        /// The version the change set was computed against.
        let expectedVersion: UInt64
        /// The epoch of the replica it was computed on: a store deleted and made again under the
        /// name is another store.
        let epoch: String
        /// The change set as the log carries it (`ReplicatedChangeSet`).
        let entry: [UInt8]
        /// Each changed model's id and its whole JSON after the change; empty when deleted.
        let models: [(id: String, json: [UInt8])]

        /// What the commit's arguments carry, roughly: its entry and models.
        var byteCount: Int { models.reduce(entry.count) { $0 + $1.id.utf8.count + $1.json.count } }
    }

    /// What waits for a commit's outcome.
    struct Waiter {
        let answer: (ReplicationOutcome) -> Void
    }

    /// Where Redis left one commit (`ClusterScripts.commit`).
    enum Outcome: Equatable {
        /// Appended under this version.
        case committed(UInt64)
        /// The store had moved on to this version.
        case moved(UInt64)
        /// Redis holds no such store.
        case noSuchStore
        /// The store is another of the same name (a new epoch), at this version: the one the
        /// commit was computed on was deleted.
        case otherEpoch(UInt64)
    }

    /// Every commit, in the order added; an index here is how each is answered.
    private(set) var commits: [Commit] = []
    private var bytes = 0

    var isEmpty: Bool { commits.isEmpty }

    var isFull: Bool { commits.count >= Self.maxCommits || bytes >= Self.maxBytes }

    func fits(_ commit: Commit) -> Bool {
        commits.isEmpty || (commits.count < Self.maxCommits && bytes + commit.byteCount <= Self.maxBytes)
    }

    /// Adds `commit` (check `fits` first).
    mutating func append(_ commit: Commit) {
        commits.append(commit)
        bytes += commit.byteCount
    }

    /// What follows the script's digest in `EVALSHA`: the number of keys, each commit's version,
    /// models, log and epoch keys, the log's bounds and the cluster's channel, then for each
    /// commit its expected version and epoch, entry, notice, count of models and the models.
    func arguments(keys: ClusterKeys, history: RedisHistory) -> RedisArguments {
        var arguments = RedisArguments(capacity: 256 + commits.count * 256 + bytes)
        arguments.append(commits.count * 4)
        for commit in commits {
            arguments.append(keys.storeVersion(commit.store))
            arguments.append(keys.storeModels(commit.store))
            arguments.append(keys.storeLog(commit.store))
            arguments.append(keys.storeEpoch(commit.store))
        }
        arguments.append(history.maxEntries)
        arguments.append(keys.channel)
        arguments.append(history.maxAgeMilliseconds)
        arguments.append(keys.life)
        for commit in commits {
            arguments.append(commit.expectedVersion)
            arguments.append(commit.epoch)
            arguments.append(commit.entry)
            arguments.append(ClusterKeys.encode(.storeChanged(commit.store)))
            arguments.append(commit.models.count)
            for model in commit.models {
                arguments.append(model.id)
                arguments.append(model.json)
            }
        }
        return arguments
    }

    /// The script's answer, one outcome for each commit in `commits`' order; nil when it is
    /// anything else.
    func outcomes(_ reply: RedisReply) -> [Outcome]? {
        guard let parts = reply.elements, parts.count == commits.count * 2 else { return nil }
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(commits.count)
        var index = 0
        while index < parts.count {
            guard let code = parts[index].integer, let version = parts[index + 1].integer, version >= 0 else { return nil }
            switch code {
            case 1: outcomes.append(.committed(UInt64(version)))
            case 0: outcomes.append(.moved(UInt64(version)))
            case -1: outcomes.append(.noSuchStore)
            case -2: outcomes.append(.otherEpoch(UInt64(version)))
            default: return nil
            }
            index += 2
        }
        return outcomes
    }
}
