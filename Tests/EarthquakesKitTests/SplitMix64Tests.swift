import Baton
import Testing

@Suite("SplitMix64")
struct SplitMix64Tests {
    @Test("matches the reference sequence for seed 0")
    func referenceSequence() {
        var random = SplitMix64(seed: 0)
        #expect(random.next() == 0xE220_A839_7B1D_CDAF)
        #expect(random.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(random.next() == 0x06C4_5D18_8009_454F)
    }

    @Test("unit() stays in 0..<1 and uniform(_:) and index(below:) stay in range")
    func ranges() {
        var random = SplitMix64(seed: 42)
        for _ in 0..<10_000 {
            #expect((0..<1).contains(random.unit()))
            #expect((-2...3).contains(random.uniform(-2...3)))
            #expect((0..<7).contains(random.index(below: 7)))
        }
    }
}
