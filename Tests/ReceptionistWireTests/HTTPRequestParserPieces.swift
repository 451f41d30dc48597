@testable import ReceptionistWire

/// Feeds `text` to a fresh parser in the given pieces and returns everything it produced.
func parse(_ pieces: [[UInt8]], limits: HTTPParserLimits = HTTPParserLimits()) -> HTTPRequestParser.Output {
    let parser = HTTPRequestParser(limits: limits)
    var all = HTTPRequestParser.Output()
    for piece in pieces {
        let output = parser.parse(piece)
        all.requests += output.requests
        if let error = output.error, all.error == nil { all.error = error }
        if let rest = output.upgradeRemainder { all.upgradeRemainder = rest }
    }
    return all
}

func parse(_ text: String, limits: HTTPParserLimits = HTTPParserLimits()) -> HTTPRequestParser.Output {
    parse([Array(text.utf8)], limits: limits)
}
