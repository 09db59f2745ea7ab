import Baton
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Points where a test stops the `earthquakes` process, to act (send Ctrl-C, start another process) at
/// an exact moment instead of guessing one with sleeps.
///
/// Off unless the environment variable ``variable`` names a point: then, when the process reaches that
/// point (the first time), it writes `BATON_EARTHQUAKES_TEST_PAUSE reached POINT` on a line of standard
/// error and waits until a byte can be read from standard input (or it is closed). A test runs the
/// executable with pipes for both, waits for the line, acts, and writes a byte.
///
/// No user sets the variable; it costs one check of a cached value at each point.
///
/// ## Thread safety
/// Stateless apart from a once-only flag; ``at(_:)`` may be called from any thread.
package enum TestPause {
    /// The environment variable that names the point to pause at.
    package static let variable = "BATON_EARTHQUAKES_TEST_PAUSE"

    /// The point to pause at, read once.
    private static let point: String? = ProcessInfo.processInfo.environment[variable].flatMap {
        $0.isEmpty ? nil : $0
    }

    /// Whether the process already paused (it pauses once).
    private static let paused = Protected(false)

    /// Whether a test asked for pauses at all (then the tool also reports when it handled a Ctrl-C).
    package static var isEnabled: Bool { point != nil }

    /// Pauses here when ``variable`` names `name` (see ``TestPause``).
    package static func at(_ name: String) {
        guard let point, point == name, !paused.exchange(true) else { return }
        say("reached \(name)")
        var byte: UInt8 = 0
        while read(STDIN_FILENO, &byte, 1) < 0 && errno == EINTR {}
    }

    /// Writes `BATON_EARTHQUAKES_TEST_PAUSE <text>` on a line of standard error, when pauses are on.
    package static func say(_ text: String) {
        guard point != nil else { return }
        let line = Array("\(variable) \(text)\n".utf8)
        line.withUnsafeBytes { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
    }
}
