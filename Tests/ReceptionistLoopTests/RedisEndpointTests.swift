import ReceptionistLoop
import Testing

@Suite struct RedisEndpointTests {
    @Test func defaultsFillWhatIsMissing() {
        #expect(RedisEndpoint(url: "redis://") == RedisEndpoint(host: "127.0.0.1", port: 6379, database: 0))
        #expect(RedisEndpoint(url: "redis://localhost") == RedisEndpoint(host: "localhost"))
        #expect(RedisEndpoint(url: "redis://10.0.0.5:7000") == RedisEndpoint(host: "10.0.0.5", port: 7000))
        #expect(RedisEndpoint(url: "redis://10.0.0.5:7000/3") == RedisEndpoint(host: "10.0.0.5", port: 7000, database: 3))
        #expect(RedisEndpoint(url: "redis://:7001/") == RedisEndpoint(port: 7001))
    }

    @Test func credentialsAndIPv6() {
        #expect(RedisEndpoint(url: "redis://:secret@host:1/2") == RedisEndpoint(host: "host", port: 1, database: 2, password: "secret"))
        #expect(RedisEndpoint(url: "redis://me:p%40ss:x@host") == RedisEndpoint(host: "host", user: "me", password: "p%40ss:x"))
        #expect(RedisEndpoint(url: "redis://[::1]:6380/1") == RedisEndpoint(host: "::1", port: 6380, database: 1))
        #expect(RedisEndpoint(url: "redis://[::1]")?.description == "redis://[::1]:6379/0")
    }

    @Test func refusesWhatIsNotARedisURL() {
        for bad in ["http://host", "host:6379", "redis://host:0", "redis://host:70000", "redis://host:x",
                    "redis://host/-1", "redis://host/db", "redis://[::1", "redis://[::1]x"] {
            #expect(RedisEndpoint(url: bad) == nil, "\(bad)")
        }
    }

    @Test func descriptionHidesThePassword() {
        #expect(RedisEndpoint(url: "redis://:secret@host:1/2")?.description == "redis://host:1/2")
    }
}

@Suite struct RedisBackoffTests {
    @Test func doublesUpToTheCapAndResets() {
        var backoff = RedisBackoff(initialMilliseconds: 50, maxMilliseconds: 1000)
        let delays = (0..<8).map { _ in backoff.nextDelayMilliseconds() }
        #expect(delays == [50, 100, 200, 400, 800, 1000, 1000, 1000])
        backoff.reset()
        #expect(backoff.nextDelayMilliseconds() == 50)
    }

    @Test func manyFailuresNeverOverflow() {
        var backoff = RedisBackoff(initialMilliseconds: 50, maxMilliseconds: 2000)
        for _ in 0..<200 { #expect(backoff.nextDelayMilliseconds() <= 2000) }
    }
}
