import Foundation

/// A registered durable job with its types erased: encoded input in, encoded output out.
struct JobRunner: Sendable {
    let kind: String
    let run: @Sendable (_ input: Data, _ context: DurableJobContext, _ kindName: String) async throws -> Data

    init<J: DurableJob>(_ job: J) {
        kind = J.kind
        run = { data, context, kind in
            let input = try DurableCoding.decode(J.Input.self, from: data, what: "input", job: context.name, kind: kind)
            let output = try await job.run(input, context: context)
            do {
                return try DurableCoding.encode(output)
            } catch {
                throw DurableError(
                    code: .decoding, jobs: [context.name],
                    message:
                        "the output of job '\(context.name)' (kind '\(kind)') does not encode as JSON: \(error). Make \(J.Output.self) encodable (no NaN or infinite numbers).",
                    underlying: error)
            }
        }
    }
}
