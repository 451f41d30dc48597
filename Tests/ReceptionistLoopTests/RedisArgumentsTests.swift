import Testing

@testable import ReceptionistLoop

@Suite struct RedisArgumentsTests {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// hiredis is handed every command followed by a NUL it does not send: it reads a
    /// `SUBSCRIBE`'s channels with `strchr`, which stops only there. Whatever the array's storage
    /// holds past its end (here a stray `$1`, which hiredis took for one more argument, then
    /// asserted on), the copy handed over ends at the command.
    @Test func aCommandIsHandedToHiredisEndingInANul() {
        var command = RedisArguments()
        command.append("news")
        var bytes = command.command("SUBSCRIBE") + Array("$1".utf8)
        bytes.removeLast(2)
        let handed = RedisConnection.handedOver(bytes)
        #expect(handed.count == bytes.count + 1 && handed.last == 0)
        #expect(Array(handed.dropLast()) == bytes)
        #expect(text(bytes) == "*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nnews\r\n")
    }

    /// Each argument is a bulk string with its byte length: text, bytes (any byte, CR LF among
    /// them), numbers as their digits, and the empty argument.
    @Test func argumentsAreBulkStringsOfTheirBytes() {
        var arguments = RedisArguments()
        arguments.append("héllo")
        arguments.append([0, 13, 10, 255])
        arguments.append(UInt64(1_700_000_000_123))
        arguments.append(0)
        arguments.append("")
        #expect(arguments.count == 5)
        #expect(arguments.bytes == Array("$6\r\nhéllo\r\n".utf8) + [36, 52, 13, 10, 0, 13, 10, 255, 13, 10]
            + Array("$13\r\n1700000000123\r\n$1\r\n0\r\n$0\r\n\r\n".utf8))
    }

    /// The command is an array of every argument, the leading words first.
    @Test func aCommandCountsItsWordsAndItsArguments() {
        var arguments = RedisArguments()
        arguments.append("k")
        arguments.append(UInt64.max)
        #expect(text(arguments.command("SET")) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n18446744073709551615\r\n")
        #expect(text(arguments.command("EVALSHA", "abc")) == "*4\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\nk\r\n$20\r\n18446744073709551615\r\n")
        #expect(text(RedisArguments().command("PING")) == "*1\r\n$4\r\nPING\r\n")
    }

    /// A command laid out from its start is the command its arguments make behind a header.
    @Test func aCommandLaidOutFromItsStartIsTheCommandItsArgumentsMake() {
        var whole = RedisArguments(command: "XREAD", arguments: 5, capacity: 0)
        whole.append("COUNT")
        whole.append(256)
        whole.append("STREAMS")
        whole.append("rcpt:t:{né}:log")
        whole.append("1700000000123-12")
        let behind = RedisArguments(["COUNT", "256", "STREAMS", "rcpt:t:{né}:log", "1700000000123-12"]).command("XREAD")
        #expect(whole.bytes == behind)
        #expect(text(whole.bytes).hasPrefix("*6\r\n$5\r\nXREAD\r\n$5\r\nCOUNT\r\n$3\r\n256\r\n"))
        #expect(text(RedisArguments(command: "PING", arguments: 0).bytes) == "*1\r\n$4\r\nPING\r\n")
    }

    /// Made from a list of arguments, it is what appending them one by one makes; an argument of
    /// ten bytes or more has a length of two digits or more.
    @Test func aListOfArgumentsIsLaidOutInOrder() {
        let list: [[UInt8]] = [Array("SELECT".utf8), Array("12".utf8), Array(repeating: 120, count: 1234)]
        var appended = RedisArguments()
        for argument in list { appended.append(argument) }
        #expect(RedisArguments(list) == appended)
        #expect(RedisArguments(list.map { String(decoding: $0, as: UTF8.self) }) == appended, "the same, from text")
        #expect(text(RedisArguments(list).command()).hasPrefix("*3\r\n$6\r\nSELECT\r\n$2\r\n12\r\n$1234\r\nxxx"))
    }

    /// Texts appended as one argument are that argument: one length (in bytes) for them all.
    @Test func textsEndToEndAreOneArgument() {
        var parts = RedisArguments()
        parts.append("rcpt:t:{", "né", "}:seq")
        parts.append("t:", "")
        var whole = RedisArguments()
        whole.append("rcpt:t:{né}:seq")
        whole.append("t:")
        #expect(parts == whole)
        #expect(text(parts.bytes) == "$16\r\nrcpt:t:{né}:seq\r\n$2\r\nt:\r\n")
    }
}
