import Baton
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct ValueJobTests {
    struct Feed: Sendable, Equatable { let items: [String] }

    @Test func aTypedDownloadParseImportChain() async throws {
        let download = ValueJob<[UInt8]>(name: "download") { _ in Array("a,b,c".utf8) }
        let parse = ValueJob<Feed>(name: "parse", input: download) { bytes, _ in
            Feed(items: String(decoding: bytes, as: UTF8.self).split(separator: ",").map(String.init))
        }
        let store = ValueJob<Int>(name: "import", input: parse) { feed, _ in feed.items.count }
        JobQueue().add([store, parse, download])
        #expect(try await store.value == 3)
        #expect(parse.output == Feed(items: ["a", "b", "c"]))
        #expect(store.dependencies.isEmpty)
    }

    @Test func aConsumerOfAFailedProducerSaysSoInsteadOfReadingNothing() async throws {
        let download = ValueJob<Int>(name: "download") { _ in throw Boom(tag: 8) }
        let ran = Recorder<Bool>()
        let parse = ValueJob<Int>(name: "parse", input: download) { value, _ in
            ran.record(true)
            return value
        }
        JobQueue().add([download, parse])
        let outcome = await parse.outcome
        let error = try #require(outcome.error as? InputUnavailable)
        #expect(error.inputName == "download")
        #expect(error.description.contains("its input 'download' produced no value because it failed"))
        #expect(ran.count == 0)
        await #expect(throws: Boom.self) { try await download.value }
    }

    @Test func aCancelledProducerIsReportedAsSuch() async throws {
        let download = ValueJob<Int>(name: "download") { _ in 1 }
        download.cancel()
        let parse = ValueJob<Int>(name: "parse", input: download) { value, _ in value }
        JobQueue().add([download, parse])
        let error = try #require(await parse.outcome.error as? InputUnavailable)
        #expect(error.inputOutcome?.isCancelled == true)
    }

    @Test func noRetainCycleBetweenProducerAndConsumer() async {
        let weakProducer = WeakJob()
        let weakConsumer = WeakJob()
        do {
            let producer = ValueJob<Int>(name: "p") { _ in 1 }
            let consumer = ValueJob<Int>(name: "c", input: producer) { v, _ in v + 1 }
            weakProducer.job = producer
            weakConsumer.job = consumer
            JobQueue().add([producer, consumer])
            _ = await consumer.outcome
        }
        // The thread that finished the consumer may still be returning from it when the outcome
        // arrives; a cycle would keep both for ever.
        #expect(await eventually { weakConsumer.job == nil }, "the consumer was never freed")
        #expect(await eventually { weakProducer.job == nil }, "the producer was never freed")
    }

    @Test func queueRunReturnsTheValue() async throws {
        let queue = JobQueue(name: "run")
        let value = try await queue.run { 6 * 7 }
        #expect(value == 42)
        await #expect(throws: Boom.self) { try await queue.run { () async throws -> Int in throw Boom() } }
    }

    @Test func cancellingTheAwaitingTaskCancelsTheJob() async {
        let queue = JobQueue(name: "run-cancel")
        let started = Gate()
        let sawCancel = Recorder<Bool>()
        let task = Task {
            try await queue.run { () async throws -> Int in
                started.open()
                await Gate().waitAsyncUnlessCancelled()
                sawCancel.record(Task.isCancelled)
                try Task.checkCancellation()
                return 1
            }
        }
        await started.waitAsync()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(sawCancel.values == [true])
        await queue.waitUntilAllJobsAreFinished()
    }
}
