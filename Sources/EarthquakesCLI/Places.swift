import Foundation

/// The places a user names instead of typing coordinates: `home` (``HomeLocation``) and the places saved
/// with `earthquakes place NAME LAT,LON`, one `NAME<TAB>LAT,LON` line each in
/// `$XDG_CONFIG_HOME/baton-earthquakes/places` (else `~/.config/baton-earthquakes/places`).
///
/// `list --near` and `show --from` take `LAT,LON`, `home` or a saved name (``resolve(_:option:environment:)``).
///
/// ## Thread safety
/// Stateless.
public enum Places {
    /// A saved place.
    public struct Place: Sendable, Equatable {
        public var name: String
        public var coordinate: Coordinate
    }

    static func path(environment: [String: String]) -> String {
        ((HomeLocation.path(environment: environment) as NSString).deletingLastPathComponent as NSString)
            .appendingPathComponent("places")
    }

    /// The saved places, in the order they were saved.
    ///
    /// - Throws: ``CLIError`` naming the file when a line of it cannot be read.
    public static func all(environment: [String: String]) throws(CLIError) -> [Place] {
        let file = path(environment: environment)
        try HomeLocation.checkNotFolder(file)
        guard let data = FileManager.default.contents(atPath: file) else { return [] }
        var places: [Place] = []
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            guard parts.count == 2, let coordinate = try? Coordinate(parsing: parts[1], option: "a saved place") else {
                throw CLIError(
                    "the saved places in \(file) hold a line that is not NAME<tab>LAT,LON (\"\(TerminalText.safe(String(line.prefix(40))))\"); "
                        + "fix or delete that line")
            }
            places.append(Place(name: parts[0], coordinate: coordinate))
        }
        return places
    }

    /// Saves (or moves) a place.
    public static func save(_ name: String, at coordinate: Coordinate, environment: [String: String]) throws(CLIError) {
        try checkName(name)
        try whileLocked(environment: environment) { () throws(CLIError) in
            var places = try all(environment: environment).filter { $0.name.lowercased() != name.lowercased() }
            places.append(Place(name: name, coordinate: coordinate))
            try write(places, environment: environment)
        }
    }

    /// Forgets a place; `false` when there was none of that name.
    public static func forget(_ name: String, environment: [String: String]) throws(CLIError) -> Bool {
        try whileLocked(environment: environment) { () throws(CLIError) -> Bool in
            let places = try all(environment: environment)
            let kept = places.filter { $0.name.lowercased() != name.lowercased() }
            guard kept.count < places.count else { return false }
            try write(kept, environment: environment)
            return true
        }
    }

    /// Runs `body` (a read, change and write of the places) holding `flock(2)` on `places.lock` beside
    /// the file: two `place` commands at once each keep the other's change instead of writing over it.
    /// Without a lock file that can be made (a read-only folder), `body` runs unlocked and its write says
    /// what is wrong.
    private static func whileLocked<T>(
        environment: [String: String], _ body: () throws(CLIError) -> T
    ) throws(CLIError) -> T {
        let folder = (path(environment: environment) as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let descriptor = open((folder as NSString).appendingPathComponent("places.lock"), O_CREAT | O_RDWR, 0o644)
        guard descriptor >= 0 else { return try body() }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 && errno == EINTR {}
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    /// A place name is a word that cannot be read as anything else: it starts with a letter, has letters,
    /// digits, `-`, `_` or `.`, at most 40 characters, and is not `home`.
    public static func checkName(_ name: String) throws(CLIError) {
        let allowed = name.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }
        guard let first = name.first, first.isLetter, allowed, name.count <= 40 else {
            throw CLIError.usage(
                "a place name starts with a letter and has letters, digits, - _ or . (at most 40); got \"\(TerminalText.safe(name))\", for example tokyo or mum-and-dad"
            )
        }
        guard name.lowercased() != "home" else {
            throw CLIError.usage("\"home\" is the home location: set it with `earthquakes home LAT,LON`")
        }
    }

    /// The point `text` names: `LAT,LON`, `home`, or a saved place (names compared without case); and how
    /// to name it in output ("home (-33.8700,151.2100)", "tokyo (35.6800,139.6900)", or the coordinates).
    ///
    /// - Throws: ``CLIError`` (a usage error) that lists the saved places when `text` is none of these.
    public static func resolve(
        _ text: String, option: String, environment: [String: String]
    ) throws(CLIError) -> (coordinate: Coordinate, label: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.contains(",") || trimmed.first.map({ $0.isNumber || $0 == "-" || $0 == "+" || $0 == "." }) == true {
            let coordinate = try Coordinate(parsing: text, option: option)
            return (coordinate, EarthquakesCLI.text(coordinate))
        }
        if trimmed.lowercased() == "home" {
            guard let home = try HomeLocation.read(environment: environment) else {
                throw CLIError.usage(
                    "\(option) home: no home location is set; set it with `earthquakes home LAT,LON`, or give LAT,LON")
            }
            return (home, "home (\(EarthquakesCLI.text(home)))")
        }
        let places = try all(environment: environment)
        if let place = places.first(where: { $0.name.lowercased() == trimmed.lowercased() }) {
            return (place.coordinate, "\(place.name) (\(EarthquakesCLI.text(place.coordinate)))")
        }
        let known =
            places.isEmpty ? "no place is saved yet" : "saved places: " + places.map(\.name).joined(separator: ", ")
        throw CLIError.usage(
            "\(option) \"\(TerminalText.safe(text))\" is not LAT,LON, home or a saved place (\(known)); save one with "
                + "`earthquakes place NAME LAT,LON`")
    }

    private static func write(_ places: [Place], environment: [String: String]) throws(CLIError) {
        let file = path(environment: environment)
        let text = places.map { "\($0.name)\t\($0.coordinate.storedText)\n" }.joined()
        do {
            try FileManager.default.createDirectory(
                atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
        } catch {
            throw CLIError(
                "cannot save the places in \(file) (\(error.localizedDescription)); set $XDG_CONFIG_HOME to a writable folder"
            )
        }
    }
}

/// Parses `--within`: a distance in kilometres (`300km`, `300 km`, `300`) or miles (`200mi`).
///
/// ## Thread safety
/// Stateless.
public enum DistanceParser {
    /// The distance `text` names, in kilometres.
    ///
    /// - Throws: ``CLIError`` (a usage error) with examples.
    public static func kilometres(_ text: String, option: String = "--within") throws(CLIError) -> Double {
        var number = text.trimmingCharacters(in: .whitespaces).lowercased()
        var factor = 1.0
        for (unit, scale) in [("km", 1.0), ("mi", 1.609344)] where number.hasSuffix(unit) {
            number = String(number.dropLast(unit.count)).trimmingCharacters(in: .whitespaces)
            factor = scale
        }
        guard let value = Double(number), value.isFinite, value > 0, value * factor <= 20_100 else {
            throw CLIError.usage(
                "\(option) \"\(text)\" is not a distance; give kilometres or miles greater than 0, for example 300km, 50 km or 200mi (at most 20100 km, half the Earth)"
            )
        }
        return value * factor
    }
}
