import Testing
@testable import ReceptionistGateway

@Suite struct TokenBucketTests {
    @Test func allowsTheBurstThenTheRate() {
        let limit = RateLimit(perSecond: 10, burst: 3)
        var bucket = limit.bucket(now: 0)
        #expect((0..<3).allSatisfy { _ in limit.take(&bucket, now: 0) })
        #expect(!limit.take(&bucket, now: 0))
        #expect(bucket.secondsUntilNext(rate: 10, burst: 3, now: 0) == 1)
        #expect(!limit.take(&bucket, now: 99), "a tenth of a second has not passed")
        #expect(limit.take(&bucket, now: 100))
        #expect(!limit.take(&bucket, now: 100))
        // A long pause refills no further than the burst.
        #expect((0..<3).allSatisfy { _ in limit.take(&bucket, now: 60_000) })
        #expect(!limit.take(&bucket, now: 60_000))
    }

    @Test func aSlowRateOwesWholeSecondsAndRefillsToTheTop() {
        let limit = RateLimit(perSecond: 0.25, burst: 2)
        var bucket = limit.bucket(now: 1_000)
        #expect(bucket.isFull(now: 1_000))
        #expect(limit.take(&bucket, now: 1_000))
        #expect(!bucket.isFull(now: 1_000))
        #expect(limit.take(&bucket, now: 1_000))
        #expect(!limit.take(&bucket, now: 1_000))
        // The next token is four seconds away.
        #expect(bucket.secondsUntilNext(rate: 0.25, burst: 2, now: 1_000) == 4)
        #expect(bucket.secondsUntilNext(rate: 0.25, burst: 2, now: 4_500) == 1)
        #expect(!limit.take(&bucket, now: 4_999))
        #expect(limit.take(&bucket, now: 5_000))
        #expect(!bucket.isFull(now: 12_999))
        #expect(bucket.isFull(now: 13_000))
    }

    /// A batch waits for all the tokens it asks: rate 1, burst 10, emptied, then a batch of 10
    /// needs ten seconds, where `Retry-After: 1` sent its retries back to a 429 nine times.
    @Test func aBatchIsToldToWaitForAllItsTokens() {
        var bucket = TokenBucket(now: 0)
        let took1 = bucket.take(10, rate: 1, burst: 10, now: 0)
        #expect(took1)
        let took2 = bucket.take(10, rate: 1, burst: 10, now: 0)
        #expect(!took2)
        #expect(bucket.secondsUntilNext(10, rate: 1, burst: 10, now: 0) == 10)
        #expect(bucket.secondsUntilNext(rate: 1, burst: 10, now: 0) == 1)
        let took3 = bucket.take(10, rate: 1, burst: 10, now: 9_999)
        #expect(!took3)
        let took4 = bucket.take(10, rate: 1, burst: 10, now: 10_000)
        #expect(took4)
    }

    /// A rate as slow as the options allow (10⁻¹² a second) does not trap: one token's interval
    /// is past what the bucket's nanoseconds hold, and the bucket stays empty.
    @Test func aVerySlowRateDoesNotTrap() {
        var bucket = TokenBucket(now: 1_000)
        let took5 = bucket.take(rate: 1e-12, burst: 1, now: 1_000)
        #expect(took5)
        let took6 = bucket.take(rate: 1e-12, burst: 1, now: 86_400_000)
        #expect(!took6)
        #expect(bucket.secondsUntilNext(rate: 1e-12, burst: 1, now: 2_000) == Int(Int32.max))
    }

    @Test func aTokenBucketIsOneWord() {
        // Every WebSocket connection holds one (docs/PERFORMANCE.md, "An idle connection").
        #expect(MemoryLayout<TokenBucket>.size == 8)
    }

    @Test func zeroRateIsUnlimited() {
        var bucket = RateLimit.unlimited.bucket(now: 0)
        #expect((0..<10_000).allSatisfy { _ in RateLimit.unlimited.take(&bucket, now: 0) })
    }
}

@Suite struct KeyedRateLimiterTests {
    @Test func countsEachKeyApart() {
        let limiter = KeyedRateLimiter(limit: RateLimit(perSecond: 1, burst: 2))
        #expect(limiter.take("a", now: 0) == .allowed)
        #expect(limiter.take("a", now: 0) == .allowed)
        #expect(limiter.take("a", now: 0) == .limited(retryAfterSeconds: 1))
        #expect(limiter.take("b", now: 0) == .allowed)
        #expect(limiter.take("a", now: 1000) == .allowed)
    }

    /// A batch takes its messages all or none: one refused spent what it had taken so far, and
    /// the next lone publish was refused too. One larger than the burst is told so, not to wait.
    @Test func aBatchTakesAllItsTokensOrNone() {
        let limiter = KeyedRateLimiter(limit: RateLimit(perSecond: 1, burst: 3))
        #expect(limiter.take("a", now: 0) == .allowed, "the call")
        #expect(limiter.take("a", count: 3, alreadyTaken: 1, now: 0) == .beyondBurst)
        #expect(limiter.take("a", count: 2, alreadyTaken: 1, now: 0) == .allowed)
        #expect(limiter.take("b", now: 0) == .allowed)
        #expect(limiter.take("b", now: 0) == .allowed)
        #expect(limiter.take("b", count: 2, alreadyTaken: 1, now: 0) == .limited(retryAfterSeconds: 1))
        #expect(limiter.take("b", now: 0) == .allowed, "the refused batch took none")
        #expect(limiter.take("b", now: 0) == .limited(retryAfterSeconds: 1))
    }

    @Test func staysBoundedAndForgetsOnlyFullBuckets() {
        let limiter = KeyedRateLimiter(limit: RateLimit(perSecond: 1, burst: 1), maxKeys: 2)
        #expect(limiter.take("a", now: 0) == .allowed)
        #expect(limiter.take("b", now: 0) == .allowed)
        // Both buckets are in use, so a third key is refused rather than let the table grow.
        #expect(limiter.take("c", now: 0) == .limited(retryAfterSeconds: 1))
        // Once they have refilled they can be forgotten, and the new key gets a bucket.
        #expect(limiter.take("c", now: 5000) == .allowed)
    }
}

@Suite struct OriginPolicyTests {
    @Test func sameOriginByDefault() {
        let policy = OriginPolicy(allowed: [])
        #expect(policy.allows(origin: nil, host: "gw:8080"), "non-browser clients send no Origin")
        #expect(policy.allows(origin: "http://gw:8080", host: "gw:8080"))
        #expect(policy.allows(origin: "https://GW:8080/", host: "gw:8080"))
        #expect(!policy.allows(origin: "http://evil.example", host: "gw:8080"))
        #expect(!policy.allows(origin: "http://gw:8081", host: "gw:8080"))
        #expect(!policy.allows(origin: "null", host: "gw:8080"))
        #expect(!policy.allows(origin: "http://gw:8080", host: nil))
    }

    /// On loopback, a page whose own name was pointed at 127.0.0.1 (DNS rebinding) sends a Host and
    /// an Origin that agree: only an address or `localhost` is the gateway's own origin there.
    @Test func onLoopbackTheGatewaysOwnOriginIsAnAddressOrLocalhost() {
        let policy = OriginPolicy(allowed: [], loopbackOnly: true)
        #expect(policy.allows(origin: "http://127.0.0.1:8080", host: "127.0.0.1:8080"))
        #expect(policy.allows(origin: "http://localhost:8080", host: "localhost:8080"))
        #expect(policy.allows(origin: "http://app.localhost:8080", host: "app.localhost:8080"))
        #expect(policy.allows(origin: "http://[::1]:8080", host: "[::1]:8080"))
        #expect(policy.allows(origin: nil, host: "evil.example:8080"), "non-browser clients send no Origin")
        #expect(!policy.allows(origin: "http://evil.example:8080", host: "evil.example:8080"))
        #expect(!policy.allows(origin: "http://127.0.0.1.evil.example:8080", host: "127.0.0.1.evil.example:8080"))
        #expect(!policy.allows(origin: "http://1.2.3.4444:8080", host: "1.2.3.4444:8080"))
        #expect(!policy.allows(origin: "http://localhost.evil:8080", host: "localhost.evil:8080"))
        #expect(OriginPolicy(allowed: ["http://evil.example:8080"], loopbackOnly: true)
            .allows(origin: "http://evil.example:8080", host: "evil.example:8080"), "a listed origin is allowed by name")
        // A page's own-origin reads carry no Origin: its Host alone tells it.
        #expect(policy.allowsHost("127.0.0.1:8080") && policy.allowsHost("LOCALHOST:8080") && policy.allowsHost("[::1]:8080"))
        #expect(!policy.allowsHost("evil.example:8080") && !policy.allowsHost("localhost.:8080"))
        for address in ["127.0.0.1", "127.0.0.1:8080", "0.0.0.0:1", "255.255.255.255:65535", "10.1.2.3"] {
            #expect(OriginPolicy.isIPv4Authority(address), "\(address)")
        }
        for name in ["127.0.0", "127.0.0.1.", "1.2.3.4.5", "256.0.0.1", "1.2.3.4444", "1..2.3", "a.b.c.d", ".1.2.3", ""] {
            #expect(!OriginPolicy.isIPv4Authority(name), "\(name)")
        }
        #expect(OriginPolicy(allowed: ["https://Public.Example"], loopbackOnly: true).allowsHost("public.example"))
        #expect(OriginPolicy(allowed: ["*"], loopbackOnly: true).allowsHost("evil.example"))
        #expect(OriginPolicy(allowed: [], loopbackOnly: false).allowsHost("evil.example"), "not on loopback: any name")
    }

    @Test func listedOriginsOnlyWhenListed() {
        let policy = OriginPolicy(allowed: ["https://app.example.com"])
        #expect(policy.allows(origin: "https://app.example.com", host: "gw"))
        #expect(!policy.allows(origin: "http://app.example.com", host: "gw"))
        #expect(!policy.allows(origin: "http://gw", host: "gw"), "a list replaces the same-origin default")
        #expect(OriginPolicy(allowed: ["*"]).allows(origin: "http://anything", host: "gw"))
    }

    @Test func corsHeadersEchoTheOrigin() {
        let policy = OriginPolicy(allowed: ["*"])
        #expect(policy.corsHeaders(origin: nil).isEmpty)
        let headers = Dictionary(uniqueKeysWithValues: policy.preflight(origin: "http://a").map { ($0.0, $0.1) })
        #expect(headers["Access-Control-Allow-Origin"] == "http://a")
        #expect(headers["Vary"] == "Origin")
        #expect(headers["Access-Control-Allow-Headers"]?.contains("Authorization") == true)
    }
}
