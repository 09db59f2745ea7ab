import Baton
import Dispatch
import Foundation

// Memory per pending job: a child process (this program, hidden subcommand `memory-probe`) warms up
// one peer, reads its resident set, adds n jobs with empty bodies to a suspended queue, and reads it
// again. One process per measurement, so one peer's peak never hides in another's baseline.

/// What one probe measured, in bytes for all n jobs.
struct MemoryReading: Codable {
    var peer: String
    var count: Int
    /// Growth of the resident set (`/proc/self/statm`) while the jobs were added and waiting.
    var resident: Int
    /// Peak resident set (`VmHWM`, reset just before the baseline) after adding, minus the resident set
    /// before: the high-water mark including transient buffers (a table's old and new storage at once).
    var peak: Int

    /// For the back-pressure probe: the bound, and the seconds from the first add to the last finish.
    var bound: Int? = nil
    var seconds: Double? = nil

    var residentPerJob: Double { Double(resident) / Double(count) }
    var peakPerJob: Double { Double(peak) / Double(count) }
}

enum MemoryProbe {
    static let peers: [Peer] = [.baton, .foundation, .gcd]

    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The peak resident set since the last ``resetPeak()``: `VmHWM` of `/proc/self/status`, or
    /// `getrusage`'s `ru_maxrss` where that is missing.
    static func peakResidentBytes() -> Int {
        if let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(
                line.dropFirst("VmHWM:".count).trimmingCharacters(in: .whitespaces).split(separator: " ")[0])
        {
            return kilobytes * 1024
        }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int(usage.ru_maxrss) * 1024  // kilobytes on Linux
    }

    /// Resets the peak resident set to the current one (Linux: write 5 to `/proc/self/clear_refs`), so
    /// that start-up and warm-up peaks do not count.
    static func resetPeak() {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return }
        _ = "5".withCString { write(fd, $0, 1) }
        close(fd)
    }

    /// Runs in the child (one process per reading, so that the peak of one does not hide in the
    /// baseline of another): measures `count` pending jobs of `peer`, prints one JSON object, and exits
    /// without running them.
    static func probe(peer: Peer, count: Int) -> MemoryReading {
        // Warm up: threads, lock stripes, the first allocations of each kind.
        let warmUp = 1_000
        let counter = Counter()
        let reading: MemoryReading
        switch peer {
        case .baton:
            let queue = JobQueue(name: "warm-up")
            for _ in 0..<warmUp { queue.add { counter.increment() } }
            queue.waitUntilAllJobsAreFinished()
            let pending = JobQueue(name: "memory")
            pending.isSuspended = true
            resetPeak()
            let resident = residentBytes()
            for _ in 0..<count { pending.add {} }
            reading = MemoryReading(
                peer: peer.rawValue, count: count, resident: residentBytes() - resident,
                peak: max(0, peakResidentBytes() - resident)
            )
            _ = Unmanaged.passRetained(pending)  // kept until exit
        case .foundation:
            let queue = OperationQueue()
            for _ in 0..<warmUp { queue.addOperation { counter.increment() } }
            queue.waitUntilAllOperationsAreFinished()
            let pending = OperationQueue()
            pending.isSuspended = true
            resetPeak()
            let resident = residentBytes()
            for _ in 0..<count { pending.addOperation {} }
            reading = MemoryReading(
                peer: peer.rawValue, count: count, resident: residentBytes() - resident,
                peak: max(0, peakResidentBytes() - resident)
            )
            _ = Unmanaged.passRetained(pending)  // kept until exit
        case .gcd:
            let group = DispatchGroup()
            for _ in 0..<warmUp { DispatchQueue.global().async(group: group) { counter.increment() } }
            group.wait()
            let pending = DispatchQueue(label: "bench.memory", attributes: .concurrent)
            pending.suspend()
            resetPeak()
            let resident = residentBytes()
            for _ in 0..<count { pending.async {} }
            reading = MemoryReading(
                peer: peer.rawValue, count: count, resident: residentBytes() - resident,
                peak: max(0, peakResidentBytes() - resident)
            )
            _ = Unmanaged.passRetained(pending)  // kept until exit: releasing a suspended DispatchQueue traps
        case .taskgroup:
            preconditionFailure("no memory probe for task groups")
        }
        return reading
    }

    /// Runs in the child: one producer adds `count` jobs (empty bodies) through `addWhenRoom` to a queue
    /// bounded at `bound` unfinished jobs, and the resident set is read at the end; the peak (`VmHWM`)
    /// shows whether memory stayed flat while they ran.
    static func probeBounded(count: Int, bound: Int) -> MemoryReading {
        let counter = Counter()
        let warm = JobQueue(name: "warm-up")
        for _ in 0..<1_000 { warm.add { counter.increment() } }
        warm.waitUntilAllJobsAreFinished()
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: bound)
        resetPeak()
        let resident = residentBytes()
        let start = ContinuousClock.now
        let done = DispatchSemaphore(value: 0)
        Task {
            for _ in 0..<count { try await queue.addWhenRoom(BlockJob { counter.increment() }) }
            await queue.waitUntilAllJobsAreFinished()
            done.signal()
        }
        done.wait()
        let seconds = (ContinuousClock.now - start).seconds
        return MemoryReading(
            peer: Peer.baton.rawValue, count: count, resident: residentBytes() - resident,
            peak: max(0, peakResidentBytes() - resident), bound: bound, seconds: seconds)
    }

    /// Runs in the parent: spawns `baton-bench memory-probe` and reads its answer. `nil` (with a
    /// message) if the child failed or did not answer within `timeout` (it is then killed).
    static func measure(peer: Peer, count: Int, bound: Int? = nil, timeout: Duration) -> MemoryReading? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments =
            ["memory-probe", "--peer", peer.rawValue, "--count", "\(count)"]
            + (bound.map { ["--bound", "\($0)"] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.run()
        } catch {
            progress("memory probe \(peer.title) n=\(count): could not start: \(error)")
            return nil
        }
        let seconds = Double(timeout.components.seconds)
        if exited.wait(timeout: .now() + seconds) == .timedOut {
            progress("memory probe \(peer.title) n=\(count): no answer within \(timeout); killed")
            process.terminate()
            process.waitUntilExit()
            return nil
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        guard process.terminationStatus == 0, let reading = try? JSONDecoder().decode(MemoryReading.self, from: data)
        else {
            progress(
                "memory probe \(peer.title) n=\(count): failed (status \(process.terminationStatus)): "
                    + String(decoding: data, as: UTF8.self)
            )
            return nil
        }
        return reading
    }
}
