import Testing
import ReceptionistWire

@Suite struct HMACSHA256Tests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    @Test func rfc4231Case2() {
        let mac = HMACSHA256.mac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(hex(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func rfc4231Case6LongKeyIsHashedFirst() {
        let mac = HMACSHA256.mac(
            key: [UInt8](repeating: 0xAA, count: 131),
            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        #expect(hex(mac) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test func emptyKeyAndMessage() {
        // HMAC-SHA256("", "") is a published constant.
        #expect(hex(HMACSHA256.mac(key: [], message: [])) == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }
}

@Suite struct ConstantTimeTests {
    @Test func equalOnlyForIdenticalBytes() {
        #expect(ConstantTime.equal(Array("secret".utf8), Array("secret".utf8)))
        #expect(!ConstantTime.equal(Array("secret".utf8), Array("secreT".utf8)))
        #expect(!ConstantTime.equal(Array("secret".utf8), Array("secret-longer".utf8)))
        #expect(!ConstantTime.equal(Array("secret".utf8), []))
        #expect(ConstantTime.equal([], []))
    }
}
