import ReceptionistLoop
import ReceptionistPush
import ReceptionistWire

/// Presence across the cluster: each node keeps one entry per topic or store it has members of,
/// in a hash on the server that holds the name (`rcpt:p:{name}:t`), and beats its heart on every
/// server (`rcpt:nodes`, scored by Redis's clock) every third of `--heartbeat-timeout`. A node
/// silent past the time-out is dead: every heartbeat answer names the dead, and each node takes
/// their members out of its presences; a read leaves their entries out and removes them. So a
/// node that dies is out of presence within `--presence-interval` plus the time-out (invariant 44).
extension ClusterEngine: PresenceSource {
    func sharePresence(_ target: StreamTarget, entry: [UInt8]?) {
        let link = shard(target.name)
        // A node away from Redis shares everything again when it is back (`catchUp`).
        guard link.isUp else { return }
        let keys = link.keys
        link.commands.eval(ClusterScripts.presenceShare, [
            Array("2".utf8), Array(keys.presence(target).utf8), Array(keys.nodes.utf8), Array(nodeID.utf8), entry ?? [],
            Array(keys.channel.utf8), Array(ClusterKeys.encode(.presenceChanged(target, node: nodeID)).utf8),
        ]) { _ in }
    }

    func readPresence(_ target: StreamTarget, done: @escaping ([String: [UInt8]]?) -> Void) {
        let link = shard(target.name)
        guard link.isUp else { return done(nil) }
        let keys = link.keys
        let timeout = String(heartbeatTimeoutMilliseconds)
        LoopDeadline.run(loop, seconds: timeoutSeconds, timedOut: { nil }, { answer in
            let sent = link.commands.eval(ClusterScripts.presenceRead, [
                "2", keys.presence(target), keys.nodes, nodeID, timeout,
            ]) { reply in
                guard let flat = reply?.elements else { return answer(nil) }
                var entries: [String: [UInt8]] = [:]
                var index = 0
                while index + 1 < flat.count {
                    if let node = flat[index].text, let entry = flat[index + 1].bytes { entries[node] = entry }
                    index += 2
                }
                answer(entries)
            }
            if !sent { answer(nil) }
        }, done: done)
    }

    /// Beats this node's heart on every server that is up; takes the members of the nodes each
    /// server names dead out of this node's presences, and shares everything again on a server
    /// that had taken this node for dead.
    func beat() {
        let timeout = String(heartbeatTimeoutMilliseconds)
        // Beats on every connected server, answering or not: an answer is what brings a link that
        // stopped answering back up.
        for link in shards {
            link.learnLifeIfRefused()
            link.checkNotices()
            link.retryRefusedReads()
        }
        for link in shards where link.isConnected {
            link.checkAnswering()
            let sent = link.commands.eval(ClusterScripts.heartbeat, ["1", link.keys.nodes, nodeID, timeout]) {
                [weak self, weak link] reply in
                if reply != nil { link?.beatAnswered() }
                guard let self, let link, let parts = reply?.elements, let stale = parts.first?.integer else { return }
                let dead = Set(parts.dropFirst().compactMap(\.text))
                hub.presenceRelay.nodesLost(dead, where: { self.shard($0) === link })
                if stale == 1 { hub.presenceRelay.reshare(where: { self.shard($0) === link }) }
            }
            if sent { link.beatSent() }
        }
    }
}


