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

    /// The earliest time a feed in seconds is believed to hold: 1500-01-01 (historical catalogs go
    /// back centuries, not millennia). A small negative value read as seconds before that (−4.7·10¹⁰ is
    /// the year 480) is milliseconds: 1966–1970.
    static let earliestSeconds: Double = -14_831_769_600

    /// Decides whether a feed's event times are in seconds rather than milliseconds.
    ///
    /// The USGS writes every time in milliseconds; a feed in seconds is a third-party rewrite, so
    /// seconds must be the only sensible reading. The rule (documented on ``FeedParser``):
    /// 1. If the feed has no event times, they are milliseconds (nothing to convert).
    /// 2. If any event time or `updated` time is 10¹¹ or more in magnitude, they are milliseconds:
    ///    in seconds that would be after the year 5000 (or before the year −1200).
    /// 3. If, read as seconds, any time is before 1500 or any `updated` time before 1970 (no catalog
    ///    was revised then), they are milliseconds (events of 1966–1970).
    /// 4. Every value is below 10¹¹: in milliseconds all events would lie between 1966-10 and
    ///    1973-03, in seconds between 1500 and 5138. Seconds is chosen unless the feed's
    ///    `metadata.generated` (itself read as seconds when below 10¹¹) says otherwise: a
    ///    feed cannot contain events (or revisions) from after it was generated, so if the seconds
    ///    reading puts any of them more than a day after `generated`, the times are milliseconds
    ///    (an archive of 1966–1973 events).
    ///
    /// - Parameters:
    ///   - times: the raw `time` values of the features that have one.
    ///   - updated: the raw `updated` values of the features that have one.
    ///   - generated: `metadata.generated` in milliseconds, when present.
    static func detectTimeUnit(
        times: [Double], updated: [Double] = [], generatedMilliseconds generated: Double?
    ) -> TimeUnit {
        guard !times.isEmpty else { return .milliseconds }
        var latest = -Double.infinity
        for time in times {
            if abs(time) >= secondsThreshold || time < earliestSeconds { return .milliseconds }
            latest = max(latest, time)
        }
        for time in updated {
            if abs(time) >= secondsThreshold || time < 0 { return .milliseconds }
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
