import ReceptionistLoop
import ReceptionistModel

extension ClusterEngine {
    /// Commits a change set to a store through Redis; see `RedisStoreReplication`. The commit
    /// waits with the others of this loop iteration for the same server (`CommitBatcher`); each
    /// batch is one script call. A commit is answered once this node's replica has applied it, and
    /// a conflict once the replica has caught up with the version that won, each within
    /// `--redis-timeout`, so the committer never waits on a thread for either.
    func commit(
        store name: String, expectedVersion: UInt64, epoch: String, entry: [UInt8], models: [(String, [UInt8])],
        completion: @escaping (ReplicationOutcome) -> Void
    ) {
        let index = ShardMap.index(of: name, shards: shards.count)
        let link = shards[index]
        guard link.isUp else { return completion(.failed(.unavailable(link.refusal))) }
        // Followed from now on, as every store this node writes is (not one deleted here since).
        if stores.store(name) != nil { _ = storeFollowing(name) }
        let commit = CommitBatch.Commit(
            store: name, expectedVersion: expectedVersion, epoch: epoch, entry: entry, models: models.map { (id: $0.0, json: $0.1) })
        committers[index].add(commit, CommitBatch.Waiter(answer: completion))
    }

    /// Sends one batch of commits to `link` as one script call and answers each of them.
    func send(_ batch: CommitBatch, _ waiters: [CommitBatch.Waiter], to link: RedisLink) {
        func answerAll(_ error: StoreError) {
            for waiter in waiters { waiter.answer(.failed(error)) }
        }
        let sent = link.commands.eval(ClusterScripts.commit, batch.arguments(keys: link.keys, history: redisHistory)) {
            [unowned self] reply in
            switch reply {
            case .error(let text)?:
                // A script that fails part way keeps what it wrote before: the batch's earlier
                // commits may be applied.
                answerAll(.outcomeUnknown("Redis failed the call (\(text)); the commit may or may not be applied"))
            case let reply?:
                guard let outcomes = batch.outcomes(reply) else {
                    return answerAll(.outcomeUnknown("Redis answered the commit with something else"))
                }
                for (index, commit) in batch.commits.enumerated() {
                    settle(commit.store, epoch: commit.epoch, outcomes[index], waiters[index].answer)
                }
            case nil:
                answerAll(.outcomeUnknown("lost the connection to Redis before it answered; the commit may or may not be applied"))
            }
        }
        if !sent { answerAll(.unavailable(link.refusal)) }
    }

    /// Answers one commit as Redis left it. Within the commit's deadline (`RedisStoreReplication`),
    /// which answers it otherwise: the outcome is then unknown.
    private func settle(
        _ name: String, epoch: String, _ outcome: CommitBatch.Outcome, _ completion: @escaping (ReplicationOutcome) -> Void
    ) {
        guard stores.store(name) != nil else {
            // Deleted here since (its replica dropped): answered as Redis did, and not followed
            // again, which would keep a follower for a store gone.
            switch outcome {
            case .committed(let version): completion(.committed(version))
            case .moved(let version), .otherEpoch(let version): completion(.conflict(version))
            case .noSuchStore: completion(.failed(.noSuchStore(name)))
            }
            return
        }
        let (reader, follower) = storeFollowing(name)
        let replica = stores.store(name)?.version ?? 0
        switch outcome {
        case .committed(let version):
            // Applied in the commit's epoch: committed. In another first: Redis lost data, and the
            // version the replica reached is not this commit.
            follower.whenApplied(version, epoch: epoch.isEmpty ? nil : epoch, seconds: timeoutSeconds) { applied in
                completion(applied ? .committed(version) : .failed(.outcomeUnknown(
                    "Redis lost data after taking the commit; the store moved to a new epoch, and the commit may be lost")))
            }
            reader.read()
        case .moved(let version) where version < replica:
            // A version behind this replica in its epoch: Redis came back with older data; read
            // the store whole, in a new epoch.
            completion(.conflict(version))
            follower.storeWentBack(reader)
        case .moved(let version):
            follower.whenApplied(version, seconds: timeoutSeconds) { _ in completion(.conflict(version)) }
            reader.read()
        case .noSuchStore:
            completion(.failed(.noSuchStore(name)))
            // Redis lost it: the replica is read again, and emptied (a store this node saw
            // deleted gets no replica: `StoreFollower.resync`).
            resyncStore(name)
        case .otherEpoch(let version):
            // Computed on a replica of a store deleted since, and made again under the name: read
            // the new one whole, and compute again on it.
            completion(.conflict(version))
            resyncStore(name)
        }
    }
}
