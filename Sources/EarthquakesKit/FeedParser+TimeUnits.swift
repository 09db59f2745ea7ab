extension FeedParser {
    /// The unit of the event times in a feed.
    enum TimeUnit: Equatable {
        case milliseconds
        case seconds

        /// Factor that turns a value in this unit into milliseconds.
        var toMilliseconds: Double { self == .seconds ? 1000 : 1 }
    }

    /// Times below this magnitude are "small": 10¹¹ ms is 1973-03-03, while 10¹¹ s is the
    /// year 5138.
    static let secondsThreshold: Double = 1e11

    /// One day in milliseconds: slack for clocks and for events published a little ahead.
    static let oneDayInMilliseconds: Double = 86_400_000

    /// Decides whether a feed's event times are in seconds rather than milliseconds.
    ///
    /// The rule (documented on ``FeedParser``):
    /// 1. If the feed has no event times, they are milliseconds (nothing to convert).
    /// 2. If any event time is 10¹¹ or more in magnitude, they are milliseconds: in seconds
    ///    that would be after the year 5000.
    /// 3. Every time is below 10¹¹: in milliseconds all events would lie between 1966-10 and
    ///    1973-03, in seconds between 1970 and 5138. Seconds is chosen unless the feed's
    ///    `metadata.generated` (itself read as seconds when below 10¹¹) says otherwise: a
    ///    feed cannot contain events from after it was generated, so if the seconds reading
    ///    puts any event more than a day after `generated`, the times are milliseconds
    ///    (an archive of 1966–1973 events).
    ///
    /// - Parameters:
    ///   - times: the raw `time` values of the features that have one.
    ///   - generated: `metadata.generated` in milliseconds, when present.
    static func detectTimeUnit(times: [Double], generatedMilliseconds generated: Double?) -> TimeUnit {
        guard !times.isEmpty else { return .milliseconds }
        var latest = -Double.infinity
        for time in times {
            if abs(time) >= secondsThreshold { return .milliseconds }
            latest = max(latest, time)
        }
        if let generated, latest * 1000 > generated + oneDayInMilliseconds {
            return .milliseconds
        }
        return .seconds
    }

    /// `metadata.generated` in milliseconds: the USGS gives milliseconds; a value below 10¹¹
    /// (before 1973 in milliseconds, long before GeoJSON feeds existed) is read as seconds.
    static func generatedMilliseconds(_ raw: Double?) -> Double? {
        guard let raw else { return nil }
        return abs(raw) < secondsThreshold ? raw * 1000 : raw
    }
}
