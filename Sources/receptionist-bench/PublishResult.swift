/// Where the publisher's completion leaves its summary for the command to print after the loop.
///
/// Loop thread only (the command's thread is the loop's).
final class PublishResult {
    var summary: Publisher.Summary?
}
