import ArgumentParser
import EarthquakesCLI
import Foundation

struct Home: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show, set or forget the home location that `show` measures distances from.",
        usage: "earthquakes home [<lat,lon>] [--clear]")

    // `.allUnrecognized`: a southern or western home (-33.87,151.21) starts with "-" and is the
    // argument, not an option (as --near and --from take it).
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("The new home, for example -33.87,151.21.", valueName: "lat,lon"))
    var arguments: [String] = []
    @Flag(help: "Forget the home location.") var clear = false

    /// The arguments but for a first `--` (the usual end of options: `home -- -33.87,151.21`).
    var locations: [String] { Home.withoutSeparator(arguments) }
    var location: String? { locations.first }

    static func withoutSeparator(_ arguments: [String]) -> [String] {
        guard let separator = arguments.firstIndex(of: "--") else { return arguments }
        var arguments = arguments
        arguments.remove(at: separator)
        return arguments
    }

    func validate() throws {
        // `.allUnrecognized` takes every unknown option too: a word starting with "-" is the location only
        // when it is a pair of numbers (-33.87,151.21); `--cler` or `-x` is an unknown option.
        // Only a dash followed by a letter looks like an option; "-33.87," (a space after the comma) is a
        // malformed location, for the messages below.
        for text in locations where Self.looksLikeOption(text) && !Self.isNumberPair(text) {
            throw ValidationError("Unknown option '\(text)'")
        }
        guard locations.count <= 1 else {
            throw ValidationError(
                "give one location, for example -33.87,151.21 (no space after the comma); got \(locations.joined(separator: " "))"
            )
        }
        guard !(clear && location != nil) else { throw ValidationError("give a location or --clear, not both") }
        try usageChecked {
            _ = try location.map { text throws(CLIError) in try Coordinate(parsing: text, option: "home") }
        }
    }

    /// Whether `text` reads as two numbers separated by a comma (whether they make a valid location is
    /// checked after).
    /// "-x" or "--clear"-like words: a dash, or two, and a letter.
    static func looksLikeOption(_ text: String) -> Bool {
        let rest = text.drop { $0 == "-" }
        return rest.count < text.count && text.count - rest.count <= 2 && (rest.first?.isLetter ?? true)
    }

    static func isNumberPair(_ text: String) -> Bool {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { Double($0.trimmingCharacters(in: .whitespaces)) != nil }
    }

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            try cli.home(
                set: try location.map { text throws(CLIError) in try Coordinate(parsing: text, option: "home") },
                clear: clear)
        }
    }
}

struct Place: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, show, save or forget named places that --near and --from take.",
        usage: "earthquakes place [<name> [<lat,lon>]] [--forget]",
        discussion: """
            `earthquakes place tokyo 35.68,139.69` saves a place; `earthquakes list --near tokyo --within 300km` \
            uses it. Without a name, lists the saved places (and home).
            """)

    @Argument(
        help: ArgumentHelp("The place's name: a word starting with a letter, for example tokyo.", valueName: "name"))
    var name: String?
    // `.allUnrecognized`: a southern or western point (-33.87,151.21) starts with "-".
    @Argument(
        parsing: .allUnrecognized, help: ArgumentHelp("Where it is, for example -33.87,151.21.", valueName: "lat,lon"))
    var arguments: [String] = []
    @Flag(help: "Forget the place.") var forget = false

    /// The arguments but for a first `--` (`place sydney -- -33.9,151.2`).
    var locations: [String] { Home.withoutSeparator(arguments) }

    func validate() throws {
        for text in locations where Home.looksLikeOption(text) && !Home.isNumberPair(text) {
            throw ValidationError("Unknown option '\(text)'")
        }
        guard locations.count <= 1 else {
            throw ValidationError("give one location, for example -33.87,151.21 (no space after the comma)")
        }
        guard !(forget && !locations.isEmpty) else { throw ValidationError("give a location or --forget, not both") }
        guard name != nil || (locations.isEmpty && !forget) else { throw ValidationError("give the place's name") }
        try usageChecked {
            if let name { try Places.checkName(name) }
            _ = try locations.first.map { text throws(CLIError) in try Coordinate(parsing: text, option: "place") }
        }
    }

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            try cli.place(
                name,
                set: try locations.first.map { text throws(CLIError) in try Coordinate(parsing: text, option: "place")
                },
                forget: forget)
        }
    }
}
