import Foundation
public import Tracing

// The submitter's trace context travels with a run: injected into a string dictionary at submission
// (swift-distributed-tracing's `Instrument.inject`), stored with the run, read back by the worker that
// claims one of its jobs and extracted into the parent of the attempt's span.

extension GraphSpec {
    /// The trace context a store keeps with the run: ``traceCarrier`` when it is set, else the
    /// submitter's `ServiceContext.current` injected by `instrument` (the bootstrapped one by default,
    /// `InstrumentationSystem.instrument`). Empty when there is no context or no instrument.
    public func carrierToStore(instrument: (any Instrument)? = nil) -> [String: String] {
        if !traceCarrier.isEmpty { return traceCarrier }
        guard let context = ServiceContext.current else { return [:] }
        let instrument = instrument ?? InstrumentationSystem.instrument
        if instrument is NoOpTracer || instrument is NoOpInstrument { return [:] }
        var carrier: [String: String] = [:]
        instrument.inject(context, into: &carrier, using: DictionaryCarrier())
        return carrier
    }
}

/// Writes and reads a carrier that is a `[String: String]`.
struct DictionaryCarrier: Injector, Extractor {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

/// How stores keep a carrier: JSON text, `NULL` when empty.
package enum TraceCarrierCoding {
    package static func encode(_ carrier: [String: String]) -> String? {
        guard !carrier.isEmpty, let data = try? JSONEncoder().encode(carrier) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    package static func decode(_ text: String?) -> [String: String] {
        guard let text, let carrier = try? JSONDecoder().decode([String: String].self, from: Data(text.utf8)) else {
            return [:]
        }
        return carrier
    }
}

extension JobStore {
    /// The default for stores that keep no trace context: none.
    public func traceCarrier(of run: DurableRunID) async throws -> [String: String] { [:] }
}

/// The task-local mark of an attempt's context: the durable job's id. A body that finds it (its own,
/// or under a span a queue instrument started from it) keeps the context it has.
enum DurableAttemptKey: ServiceContextKey {
    typealias Value = Int64
}
