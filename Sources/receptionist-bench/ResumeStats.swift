/// What subscribers that resumed a store with `since` were answered, checked against the
/// protocol: a version still in the history gets `subscribed` (at `since`) and then every change
/// set from `since + 1` on; one too old gets a snapshot with `"reset":true`. After either, each
/// `changes` frame follows the version before it (`version - 1`, or `from` when it is conflated).
struct ResumeStats {
    /// Answered `subscribed`, resumed.
    var resumed = 0
    /// `subscribed` naming another version than `since`.
    var wrongVersion = 0
    /// Resumed subscribers whose first `changes` frame followed `since` exactly.
    var firstChangeExact = 0
    /// Resumed subscribers whose first `changes` frame did not: change sets were lost.
    var firstChangeGap = 0
    /// Answered with a snapshot marked `"reset":true`.
    var reset = 0
    /// Answered with a snapshot not marked reset: a resume must never be answered so.
    var notReset = 0
    /// Later `changes` frames that did not follow the version before them.
    var gaps = 0

    var json: String {
        #"{"resumed":\#(resumed),"wrong_version":\#(wrongVersion),"first_change_exact":\#(firstChangeExact),"#
            + #""first_change_gap":\#(firstChangeGap),"reset":\#(reset),"not_reset":\#(notReset),"gaps":\#(gaps)}"#
    }
}
