import Foundation

// baton-postgres-chaos: the chaos test of BatonPostgres with real processes and a real server.
//
//   baton-postgres-chaos [--jobs N] [--seed S] [--workers W] [--quick] [--crash]  # needs BATON_POSTGRES_URL
//   baton-postgres-chaos worker --url U --schema S --id W --journal DIR [--lease-ms M]  # started by the above
//   baton-postgres-chaos bench-worker --url U --schema S --run R --slots N --gate DIR --index I  # started by bench
//   baton-postgres-chaos bench [--quick] [--runs N] [--peers PYTHON|none] [--only W,..] [--chains N,..]  # speed beside the peers (Bench.swift)
//
// Full mode (CI): 20,000 jobs; --quick: 3,000. The PostgreSQL restart uses `.ci/postgres restart`
// (set BATON_POSTGRES_RESTART to another command, or to an empty string to skip it); with --crash,
// `.ci/postgres crash`: an immediate shutdown, as in a power loss — claims and submissions that
// committed without waiting for the WAL flush are lost, and workers' leases on them with them.

func value(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

let arguments = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment
if arguments.first == "worker" {
    guard let url = value("--url", in: arguments), let schema = value("--schema", in: arguments),
        let id = value("--id", in: arguments), let journal = value("--journal", in: arguments)
    else {
        FileHandle.standardError.write(
            Data("usage: baton-postgres-chaos worker --url U --schema S --id W --journal DIR [--lease-ms M]\n".utf8))
        exit(2)
    }
    let lease = Int(value("--lease-ms", in: arguments) ?? "") ?? 2000
    try await ChaosWorker(
        url: url, schema: schema, id: id, concurrency: 8, lease: .milliseconds(lease), journal: journal
    ).run()
    exit(0)
}
if arguments.first == "bench-worker" {
    guard let url = value("--url", in: arguments), let schema = value("--schema", in: arguments),
        let run = Int64(value("--run", in: arguments) ?? ""), let slots = Int(value("--slots", in: arguments) ?? ""),
        let gate = value("--gate", in: arguments), let index = Int(value("--index", in: arguments) ?? "")
    else {
        FileHandle.standardError.write(
            Data(
                "usage: baton-postgres-chaos bench-worker --url U --schema S --run R --slots N --gate DIR --index I\n"
                    .utf8))
        exit(2)
    }
    try await BenchWorkerProcess(url: url, schema: schema, run: run, slots: slots, gate: gate, index: index).main()
    exit(0)
}
guard let url = value("--url", in: arguments) ?? environment["BATON_POSTGRES_URL"] else {
    FileHandle.standardError.write(
        Data("baton-postgres-chaos: no server; run `source .ci/postgres` first or pass --url\n".utf8))
    exit(2)
}
let quick = arguments.contains("--quick")
if arguments.first == "bench" {
    let runs = Int(value("--runs", in: arguments) ?? "") ?? (quick ? 1 : 3)
    var bench = PostgresBench(
        url: url, quick: quick, peersPython: value("--peers", in: arguments), runs: max(1, runs))
    if let only = value("--only", in: arguments) { bench.only = Set(only.split(separator: ",").map(String.init)) }
    if let chains = value("--chains", in: arguments) {
        bench.chainLengths = chains.split(separator: ",").compactMap { Int($0) }
    }
    try await bench.run()
    exit(0)
}
let jobs = Int(value("--jobs", in: arguments) ?? "") ?? (quick ? 3000 : 20000)
let seed = UInt64(value("--seed", in: arguments) ?? "") ?? 1
let workers = Int(value("--workers", in: arguments) ?? "") ?? 4
var restart: [String]? = nil
if let command = environment["BATON_POSTGRES_RESTART"] {
    restart = command.isEmpty ? nil : [command]
} else if environment["BATON_POSTGRES_DATA"] != nil, FileManager.default.isExecutableFile(atPath: ".ci/postgres") {
    restart = [".ci/postgres", arguments.contains("--crash") ? "crash" : "restart"]
}
if restart == nil { say("chaos: no PostgreSQL restart (run from the package root after `source .ci/postgres`)") }
let passed = try await ChaosRun(
    url: url, jobs: jobs, seed: seed, workers: workers, deadline: quick ? .seconds(240) : .seconds(900),
    restartCommand: restart, crash: arguments.contains("--crash")
).run()
exit(passed ? 0 : 1)

/// Prints a line at once (stdout may be a pipe or a file; nothing is lost if the process is killed).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
