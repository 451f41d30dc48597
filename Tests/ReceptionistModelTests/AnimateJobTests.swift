@testable import ReceptionistModel
import Testing

@Suite struct AnimateJobTests {
    @Test func aFastJobIsCutIntoShortSlicesAndForgetsWhatItCannotDo() {
        let job = AnimateJob(id: "j", store: ModelStore(name: "s"), rate: 10_000_000, seed: 1)
        let start = Clock.monotonicSeconds()
        // A second's worth is due at once: two slices of at most the cap, not five million each.
        let slices = job.dueSlices(now: start + 1, threads: 2)
        #expect(slices.count == 2 && slices.allSatisfy { $0 <= AnimateJob.maxSliceChangeSets })
        for slice in slices { job.run(slice: 0); _ = slice }
        // What did not fit (more than a second behind) is forgotten, not queued.
        let next = job.dueSlices(now: start + 1.001, threads: 2)
        #expect(next.reduce(0, +) <= 2 * AnimateJob.maxSliceChangeSets)
        #expect(next.reduce(0, +) < 20_000)
    }

    @Test func aSlowJobGetsWhatIsDue() {
        let job = AnimateJob(id: "j", store: ModelStore(name: "s"), rate: 100, seed: 1)
        let start = Clock.monotonicSeconds()
        let slices = job.dueSlices(now: start + 0.5, threads: 2)
        #expect((49...51).contains(slices.reduce(0, +)))
    }
}
