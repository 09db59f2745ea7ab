import BatonObservability
import BatonTesting
import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 31, defect 6: the table assumed about 100 columns; at 80 every row wrapped, at 60 it was
/// unreadable. It now fits the terminal's width (or `COLUMNS`): the place is shortened first, then the
/// depth column is left out; the time, the magnitude and the id are never cut.
@Suite(.timeLimit(.binarySuite)) struct TableWidthTests {
    /// The listing of ``ListingTests/quakes`` at `width` columns (`nil`: no width known).
    func table(width: Int?) throws -> [String] {
        let (scratch, path) = try ListingTests.database()
        defer { scratch.remove() }
        var captured = CapturedConsole()
        captured.console.terminalColumns = width
        try EarthquakesCLI.forTests(captured).list(ListOptions(limit: nil), database: path, json: false)
        return captured.lines.filter { !$0.isEmpty }
    }

    /// The time, magnitude and id of a row (the first 23 characters, and the last word).
    func essentials(_ row: String) -> (String, String) {
        (String(row.prefix(23)), String(row.split(separator: " ").last ?? ""))
    }

    @Test(arguments: [120, 100, 90, 80, 72, 60, 50, 45])
    func everyRowFitsAndKeepsItsTimeMagnitudeAndID(width: Int) throws {
        let full = try table(width: nil)
        let fitted = try table(width: width)
        #expect(fitted.count == full.count)
        for (row, original) in zip(fitted, full) {
            #expect(row.count <= width, "\(row.count) > \(width): \(row)")
            if row.hasPrefix("TIME") { continue }
            #expect(essentials(row) == essentials(original), "\(row)\n\(original)")
        }
        // Where the full table fits with ids of USGS's longest (12 characters), its rows are unchanged (the
        // details after the id come in the room left beyond that).
        if width >= 35 + 2 + 48 + 2 + 12 { #expect(fitted.dropFirst() == full.dropFirst()) }
    }

    /// Places were counted by Unicode scalars: a row with a CJK place (two columns a character) ran past
    /// the terminal's width and pushed its id out of line, and one with a combining accent came out a
    /// column short. Rows are now measured in the columns a terminal gives them.
    @Test(arguments: [nil, 100, 80, 60] as [Int?])
    func wideAndCombiningCharactersKeepTheColumnsInLine(width: Int?) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let time = Date(timeIntervalSince1970: 1_700_000_000)
        let places = [
            "ascii": "12 km N of Somewhere, CA",
            "wide": "東京都の北 12 km、日本の本州の東海岸沖の太平洋の海底、とても長い地名です",
            "marks": "Montre\u{301}al Montre\u{301}al Montre\u{301}al Montre\u{301}al Montre\u{301}al Montre\u{301}al",
            "emoji": "🌋🌋🌋 near the volcano 🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋🌋",
        ]
        _ = try EarthquakeStore(path: path).importFeed(
            places.sorted { $0.key < $1.key }.enumerated().map { index, entry in
                Earthquake(
                    id: entry.key, latitude: 1, longitude: 2, depth: 3, magnitude: 4, place: entry.value,
                    time: time.addingTimeInterval(Double(index)), type: "earthquake")
            })
        var captured = CapturedConsole()
        captured.console.terminalColumns = width
        try EarthquakesCLI.forTests(captured).list(ListOptions(limit: nil), database: path, json: false)
        let rows = captured.lines.filter { !$0.isEmpty }
        #expect(rows.count == 5, "\(rows)")
        // The id starts in the same column in every row, the header's ID included.
        var starts: Set<Int> = []
        for row in rows {
            let words = row.split(separator: " ")
            let id = row.hasPrefix("TIME") ? "ID" : try #require(words.last.map(String.init))
            let before = try #require(row.range(of: "  " + id, options: .backwards)).lowerBound
            starts.insert(TerminalColumns.of(row[..<before]) + 2)
            if let width { #expect(TerminalColumns.of(row) <= width, "\(TerminalColumns.of(row)) > \(width): \(row)") }
        }
        #expect(starts.count == 1, "ids start at columns \(starts.sorted()):\n\(rows.joined(separator: "\n"))")
    }

    @Test func thePlaceIsShortenedBeforeTheDepthGoes() throws {
        let at80 = try table(width: 80)
        #expect(at80[0].contains("DEPTH km"))
        #expect(at80.contains { $0.contains("Höfn Höfn Höfn Höfn Höfn Höfn …  e2") })
        let at60 = try table(width: 60)
        #expect(!at60[0].contains("DEPTH"))
        #expect(at60.contains { $0.hasPrefix("2023-11-14 23:13    6.2  12 km N of \"Sydn") && $0.hasSuffix("  e1") })
    }

    /// The real executable: `COLUMNS` when standard output is a file, and the terminal's own width.
    @Test(
        .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"),
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/ptmx"), "no /dev/ptmx (Linux pseudo-terminals)"))
    func theExecutableFitsColumnsAndItsTerminal() async throws {
        let (scratch, path) = try ListingTests.database()
        defer { scratch.remove() }
        let piped = try await EarthquakesBinaryTests.run(["list", "--database", path], environment: ["COLUMNS": "70"])
        #expect(piped.status == 0, "\(piped.stderr)")
        let lines = piped.stdout.split(separator: "\n")
        #expect(lines.count == 6)
        #expect(lines.allSatisfy { $0.count <= 70 }, "\(piped.stdout)")

        let terminal = try await PseudoTerminal.run(
            EarthquakesBinaryTests.executable!, ["list", "--database", path], columns: 58)
        let rows = terminal.split(separator: "\n").filter { !$0.isEmpty }
        #expect(rows.count == 6, "\(terminal)")
        #expect(rows.allSatisfy { $0.count <= 58 }, "\(terminal)")
        #expect(rows.contains { $0.hasSuffix("  e1") })
    }
}

/// Runs a program with its standard output on a pseudo-terminal of a given width; returns what it
/// printed there, with colours removed and line ends as `\n`.
enum PseudoTerminal {
    static func run(
        _ executable: URL, _ arguments: [String], columns: UInt16, errorsToo: Bool = false
    ) async throws -> String {
        // Linux's /dev/ptmx, unlocked and numbered with its ioctls (TIOCSPTLCK, TIOCGPTN: `posix_openpt`
        // and friends are not visible from Swift here).
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw CLIError("no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw CLIError("cannot open /dev/pts/\(number)") }
        var size = winsize(ws_row: 24, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(slave, UInt(TIOCSWINSZ), &size)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home", "NO_COLOR": "1"]
        process.standardOutput = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        process.standardError =
            errorsToo
            ? FileHandle(fileDescriptor: slave, closeOnDealloc: false) : FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        close(slave)
        let output = await offThePool { () -> [UInt8] in
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(master, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }  // EIO once the program closed its side
                bytes += buffer[0..<count]
            }
            process.waitUntilExit()
            return bytes
        }
        close(master)
        return String(decoding: output, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
    }
}
