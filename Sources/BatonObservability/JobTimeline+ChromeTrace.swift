extension JobTimeline {
    /// The run in Chrome's trace-event format (JSON), which Perfetto (ui.perfetto.dev, offline too) and
    /// `chrome://tracing` open.
    ///
    /// - A process per queue, named `queue <name>`; in it a thread per slot (`slot 0`, `slot 1`, …)
    ///   holding the jobs that ran on that slot, and a thread `not run` for jobs that finished without
    ///   running (cancelled or failed while waiting), drawn as instants.
    /// - Each job that ran is a complete event (`"ph":"X"`) named after it, with category and
    ///   `args.outcome` its outcome and `args.id`, `args.kind`, `args.queue`, `args.group` and
    ///   `args.dependencies` (ids).
    /// - The wait from ready to started is an async slice (category `wait`).
    /// - Each dependency between two jobs that ran is a flow arrow (category `dependency`) from the end
    ///   of the dependency to the start of the dependent.
    /// - Marks (``mark(_:of:)``) are instants on the job's thread.
    ///
    /// A job still running when this is called ends at the call, with `args.unfinished` true.
    public func chromeTraceJSON() -> String {
        let entries = entries
        let end = elapsed
        var out = JSONWriter()
        out.raw("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"Baton JobTimeline\"},\"traceEvents\":[")
        let layout = QueueLayout(entries)
        for (pid, queue) in layout.queues.enumerated() {
            out.event([
                ("name", .string("process_name")), ("ph", .string("M")), ("pid", .int(pid + 1)),
                ("args", .object([("name", .string("queue " + queue.title))])),
            ])
            out.event([
                ("name", .string("process_sort_index")), ("ph", .string("M")), ("pid", .int(pid + 1)),
                ("args", .object([("sort_index", .int(pid + 1))])),
            ])
            if queue.hasUnrun {
                out.event(thread("not run", pid: pid + 1, tid: 0))
            }
            for slot in 0..<queue.slots {
                out.event(thread("slot \(slot)", pid: pid + 1, tid: slot + 1))
            }
        }
        var byID: [UInt64: Entry] = [:]
        for entry in entries { byID[entry.id] = entry }
        for entry in entries {
            let pid = layout.pid(of: entry)
            let tid = entry.slot.map { $0 + 1 } ?? 0
            let outcome = entry.outcome?.rawValue ?? "running"
            var args: [(String, JSONValue)] = [
                ("id", .int(Int(truncatingIfNeeded: entry.id))), ("kind", .string(entry.kind)),
                ("queue", .string(entry.queue)), ("outcome", .string(outcome)),
            ]
            if let group = entry.group { args.append(("group", .int(Int(truncatingIfNeeded: group)))) }
            if !entry.dependencies.isEmpty {
                args.append(("dependencies", .array(entry.dependencies.map { .int(Int(truncatingIfNeeded: $0)) })))
            }
            if let started = entry.started {
                let finished = entry.finished ?? end
                if entry.finished == nil { args.append(("unfinished", .bool(true))) }
                out.event([
                    ("name", .string(entry.name)), ("cat", .string(outcome)), ("ph", .string("X")),
                    ("ts", .micros(started)), ("dur", .micros(finished &- started)), ("pid", .int(pid)),
                    ("tid", .int(tid)), ("args", .object(args)),
                ])
                if let ready = entry.ready, ready <= started {
                    let id = JSONValue.string("wait-\(entry.id)")
                    out.event([
                        ("name", .string(entry.name)), ("cat", .string("wait")), ("ph", .string("b")),
                        ("id", id), ("ts", .micros(ready)), ("pid", .int(pid)), ("tid", .int(tid)),
                    ])
                    out.event([
                        ("name", .string(entry.name)), ("cat", .string("wait")), ("ph", .string("e")),
                        ("id", id), ("ts", .micros(started)), ("pid", .int(pid)), ("tid", .int(tid)),
                    ])
                }
            } else {
                out.event([
                    ("name", .string(entry.name)), ("cat", .string(outcome)), ("ph", .string("i")), ("s", .string("t")),
                    ("ts", .micros(entry.finished ?? end)), ("pid", .int(pid)), ("tid", .int(0)),
                    ("args", .object(args)),
                ])
            }
            for mark in entry.marks {
                out.event([
                    ("name", .string("\(mark.kind.rawValue): \(entry.name)")), ("cat", .string("mark")),
                    ("ph", .string("i")), ("s", .string("t")), ("ts", .micros(mark.at)), ("pid", .int(pid)),
                    ("tid", .int(tid)), ("args", .object([("id", .int(Int(truncatingIfNeeded: entry.id)))])),
                ])
            }
        }
        // Dependencies between jobs that ran: an arrow from the end of one to the start of the other.
        var flow = 0
        for entry in entries {
            guard let started = entry.started else { continue }
            for dependencyID in entry.dependencies {
                guard let dependency = byID[dependencyID], let depStart = dependency.started,
                    let depEnd = dependency.finished, let depSlot = dependency.slot
                else { continue }
                flow += 1
                // Inside the dependency's slice (a flow binds to the slice that encloses it).
                let from = depEnd &- min((depEnd &- depStart) / 2, 500)
                out.event([
                    ("name", .string("dependency")), ("cat", .string("dependency")), ("ph", .string("s")),
                    ("id", .int(flow)), ("ts", .micros(from)), ("pid", .int(layout.pid(of: dependency))),
                    ("tid", .int(depSlot + 1)),
                ])
                out.event([
                    ("name", .string("dependency")), ("cat", .string("dependency")), ("ph", .string("f")),
                    ("bp", .string("e")), ("id", .int(flow)), ("ts", .micros(started)),
                    ("pid", .int(layout.pid(of: entry))), ("tid", .int((entry.slot ?? 0) + 1)),
                ])
            }
        }
        out.raw("]}\n")
        return out.text
    }

    private func thread(_ name: String, pid: Int, tid: Int) -> [(String, JSONValue)] {
        [
            ("name", .string("thread_name")), ("ph", .string("M")), ("pid", .int(pid)), ("tid", .int(tid)),
            ("args", .object([("name", .string(name))])),
        ]
    }
}

/// The queues of a timeline in order of first use, each with its slot count.
struct QueueLayout {
    struct Queue {
        let name: String
        let instance: Int
        var slots = 0
        var hasUnrun = false
        var title: String { instance == 1 ? name : "\(name) #\(instance)" }
    }

    struct Key: Hashable {
        let name: String
        let instance: Int
    }

    var queues: [Queue] = []
    var index: [Key: Int] = [:]

    init(_ entries: [JobTimeline.Entry]) {
        for entry in entries {
            let key = Key(name: entry.queue, instance: entry.queueInstance)
            let at =
                index[key]
                ?? {
                    queues.append(Queue(name: entry.queue, instance: entry.queueInstance))
                    index[key] = queues.count - 1
                    return queues.count - 1
                }()
            if let slot = entry.slot {
                queues[at].slots = max(queues[at].slots, slot + 1)
            } else {
                queues[at].hasUnrun = true
            }
        }
    }

    /// The 1-based process id of the entry's queue.
    func pid(of entry: JobTimeline.Entry) -> Int {
        index[Key(name: entry.queue, instance: entry.queueInstance)]! + 1
    }
}

/// A JSON value, written by hand: the trace needs no Foundation and stays in event order.
enum JSONValue {
    case string(String)
    case int(Int)
    case bool(Bool)
    /// Nanoseconds written as microseconds with three decimals (the trace format's unit).
    case micros(UInt64)
    case array([JSONValue])
    case object([(String, JSONValue)])
}

struct JSONWriter {
    var text = ""
    private var first = true

    mutating func raw(_ string: String) { text += string }

    mutating func event(_ fields: [(String, JSONValue)]) {
        if !first { text += ",\n" }
        first = false
        write(.object(fields))
    }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .string(let string): writeString(string)
        case .int(let int): text += String(int)
        case .bool(let bool): text += bool ? "true" : "false"
        case .micros(let nanos):
            let fraction = nanos % 1000
            text += String(nanos / 1000) + "." + (fraction < 10 ? "00" : fraction < 100 ? "0" : "") + String(fraction)
        case .array(let values):
            text += "["
            for (index, value) in values.enumerated() {
                if index > 0 { text += "," }
                write(value)
            }
            text += "]"
        case .object(let fields):
            text += "{"
            for (index, (key, value)) in fields.enumerated() {
                if index > 0 { text += "," }
                writeString(key)
                text += ":"
                write(value)
            }
            text += "}"
        }
    }

    private mutating func writeString(_ string: String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
