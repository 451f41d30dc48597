import Testing

@testable import ReceptionistGateway

@Suite struct RedisLifeTests {
    /// An epoch is made in the server's present life once the node has learned it, and short
    /// enough for a client to send back (64 bytes at most).
    @Test func epochsAreMadeInThePresentLife() {
        let life = RedisLife()
        #expect(!life.freshEpoch().contains("."))
        let name = RedisLife.newName()
        #expect(name.count == 8)
        life.learn(name)
        let epoch = life.freshEpoch()
        #expect(epoch.hasPrefix(name + ".") && epoch.utf8.count <= 64 && !epoch.contains(":"))
    }

    /// The run id is read from `INFO server`; a server keeps every write only with AOF on and
    /// synced on every write.
    @Test func theServersRunAndWhetherItKeepsEveryWriteAreRead() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:3f1c9e\r\ntcp_port:6379\r\n"
        #expect(RedisLife.runID(inInfo: info) == "3f1c9e")
        #expect(RedisLife.runID(inInfo: "# Server\r\n") == nil)
        #expect(RedisLife.keepsEveryWrite(config: ["appendfsync", "always", "appendonly", "yes"]))
        #expect(!RedisLife.keepsEveryWrite(config: ["appendfsync", "everysec", "appendonly", "yes"]))
        #expect(!RedisLife.keepsEveryWrite(config: ["appendfsync", "always", "appendonly", "no"]))
        #expect(!RedisLife.keepsEveryWrite(config: []))
    }
}
