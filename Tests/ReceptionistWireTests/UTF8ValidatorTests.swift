import Testing
@testable import ReceptionistWire

/// The index of the first byte at which feeding `input` one byte at a time fails, or nil.
private func failingIndex(_ input: [UInt8]) -> Int? {
    var validator = UTF8Validator()
    for (index, byte) in input.enumerated() where !validator.feed([byte]) {
        return index
    }
    return nil
}

/// What the standard library thinks: decoding with repair changes nothing only for valid UTF-8.
private func isValidByStandardLibrary(_ input: [UInt8]) -> Bool {
    Array(String(decoding: input, as: UTF8.self).utf8) == input
}

@Suite struct UTF8ValidatorTests {
    @Test(arguments: [
        "", "hello", "κόσμε", "\u{0}\u{7F}\u{80}\u{7FF}\u{800}\u{D7FF}\u{E000}\u{FFFD}\u{FFFF}\u{10000}\u{10FFFF}",
        "mixed ASCII then € and 𝄞 then more ASCII text", String(repeating: "a", count: 100) + "ü",
    ])
    func acceptsValidText(_ text: String) {
        let input = Array(text.utf8)
        var whole = UTF8Validator()
        let fed = whole.feed(input)
        #expect(fed)
        #expect(whole.isComplete)
        var byByte = UTF8Validator()
        for byte in input { let fed = byByte.feed([byte]); #expect(fed) }
        #expect(byByte.isComplete)
        #expect(input.withUnsafeBytes { UTF8Validator.isValid($0) })
    }

    /// Each invalid input fails on the exact byte that makes it impossible, not later.
    @Test(arguments: [
        ([0x80], 0),  // lone continuation
        ([0xBF], 0),
        ([0xC0, 0x80], 0),  // overlong NUL: C0 and C1 can never lead
        ([0xC1, 0xBF], 0),
        ([0xE0, 0x80, 0x80], 1),  // overlong three-byte form
        ([0xE0, 0x9F, 0xBF], 1),
        ([0xED, 0xA0, 0x80], 1),  // U+D800, a surrogate
        ([0xED, 0xBF, 0xBF], 1),  // U+DFFF
        ([0xF0, 0x80, 0x80, 0x80], 1),  // overlong four-byte form
        ([0xF0, 0x8F, 0xBF, 0xBF], 1),
        ([0xF4, 0x90, 0x80, 0x80], 1),  // U+110000
        ([0xF5, 0x80, 0x80, 0x80], 0),
        ([0xFE], 0),
        ([0xFF], 0),
        ([0xC2, 0x41], 1),  // sequence cut short by ASCII
        ([0xE2, 0x82, 0x41], 2),
        ([0xF0, 0x9D, 0x84, 0xC2], 3),
        ([0x41, 0x42, 0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80, 0x65], 14),
    ] as [([UInt8], Int)])
    func failsFastOnInvalidText(_ input: [UInt8], _ index: Int) {
        #expect(failingIndex(input) == index)
        var validator = UTF8Validator()
        let fed = validator.feed(input)
        #expect(!fed)
        #expect(!validator.isValid)
        #expect(!validator.isComplete)
        // Once failed it stays failed, whatever follows.
        let fedAfter = validator.feed(Array("ok".utf8))
        #expect(!fedAfter)
    }

    @Test func reportsAnUnfinishedCodePoint() {
        for text in ["é", "€", "𝄞"] {
            let input = Array(text.utf8)
            for cut in 1..<input.count {
                var validator = UTF8Validator()
                let fed = validator.feed(Array(input[..<cut]))
                #expect(fed)
                #expect(validator.isValid)
                #expect(!validator.isComplete, "\(text) cut at \(cut)")
                let fedRest = validator.feed(Array(input[cut...]))
                #expect(fedRest)
                #expect(validator.isComplete)
            }
        }
    }

    /// The eight-byte ASCII step must still see a bad byte at any position in a long run.
    @Test func findsABadByteAnywhereInLongASCII() {
        for position in 0..<40 {
            var input = Array(repeating: UInt8(ascii: "x"), count: 40)
            input[position] = 0xFF
            var validator = UTF8Validator()
            let fed = validator.feed(input)
            #expect(!fed, "position \(position)")
            #expect(failingIndex(input) == position)
            input[position] = 0xC3
            input.insert(0xA9, at: position + 1)
            var valid = UTF8Validator()
            let fedValid = valid.feed(input)
            #expect(fedValid && valid.isComplete, "é at \(position)")
        }
    }

    @Test func agreesWithTheStandardLibraryOnAllTwoByteInputs() {
        for first in 0...255 {
            for second in 0...255 {
                let input = [UInt8(first), UInt8(second)]
                var validator = UTF8Validator()
                let ours = validator.feed(input) && validator.isComplete
                #expect(ours == isValidByStandardLibrary(input), "\(input)")
            }
        }
    }

    @Test func agreesWithTheStandardLibraryOnMultiByteLeads() {
        var disagreements: [[UInt8]] = []
        for lead in 0xE0...0xF7 {
            for second in 0x70...0xCF {
                for third in [0x41, 0x80, 0xBF, 0xC0] {
                    let candidates: [[UInt8]] = [
                        [UInt8(lead), UInt8(second), UInt8(third)],
                        [UInt8(lead), UInt8(second), UInt8(third), 0x80],
                        [UInt8(lead), UInt8(second), UInt8(third), 0xBF],
                    ]
                    for input in candidates {
                        var validator = UTF8Validator()
                        let ours = validator.feed(input) && validator.isComplete
                        if ours != isValidByStandardLibrary(input) { disagreements.append(input) }
                    }
                }
            }
        }
        #expect(disagreements.isEmpty)
    }

    @Test func resetStartsOver() {
        var validator = UTF8Validator()
        let fed = validator.feed([0xFF])
        #expect(!fed)
        validator.reset()
        let fedAgain = validator.feed([0xE2, 0x82])
        #expect(fedAgain)
        validator.reset()
        #expect(validator.isComplete)
    }
}
