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

    /// The units of a feed's `time` values and of its `updated` values (the same today, see
    /// ``detectTimeUnits(times:updated:generatedMilliseconds:)``), with the rule that a value of 10¹¹ or
    /// more is never scaled: a feed may give times in seconds and revisions in milliseconds.
    struct TimeUnits: Equatable, Sendable {
        var time: TimeUnit
        var updated: TimeUnit

        /// Both in milliseconds, as the USGS writes them.
        static let milliseconds = TimeUnits(time: .milliseconds, updated: .milliseconds)

        /// Milliseconds from a raw `time` value.
        func time(_ raw: Double) -> Double { Self.scaled(raw, time) }
        /// Milliseconds from a raw `updated` value.
        func updated(_ raw: Double) -> Double { Self.scaled(raw, updated) }

        /// A value of 10¹¹ or more in magnitude is milliseconds whatever the unit: it is never scaled.
        private static func scaled(_ raw: Double, _ unit: TimeUnit) -> Double {
            abs(raw) >= secondsThreshold ? raw : raw * unit.toMilliseconds
        }
    }

    /// Below this (in seconds, 2001-09-09; in milliseconds, 1970-01-12) a positive time is "small": both
    /// readings are plausible, and `updated` and `generated` break the tie.
    static let smallTime: Double = 1e9

    /// Decides whether a feed's event times (`time`) are in seconds rather than milliseconds, from the
    /// times themselves.
    ///
    /// The USGS writes every time in milliseconds; a feed in seconds is a third-party rewrite, so
    /// seconds must be the only sensible reading. The rule (documented on ``FeedParser``):
    /// 1. If the feed has no event times, they are milliseconds (nothing to convert).
    /// 2. If any event time is 10¹¹ or more in magnitude, they are milliseconds: in seconds that
    ///    would be after the year 5000 (or before the year −1200). If any, read as seconds, is before
    ///    1500, they are milliseconds (events of 1966–1970).
    /// 3. If `metadata.generated` (itself read as seconds when below 10¹¹) is more than a day before the
    ///    latest time read as seconds, they are milliseconds: a feed holds no events from after it was
    ///    generated (an archive of 1966–1973 events). Likewise if a feature's time read as seconds is
    ///    more than a day after its own `updated` in milliseconds (10¹¹ or more): no event happens after
    ///    its revision, so the times are milliseconds (such an archive without `generated`).
    /// 4. Only when a time is negative or every time is small (below 10⁹: before 2001 in seconds, in the
    ///    first twelve days of 1970 in milliseconds) does `updated` break the tie: an `updated` of 10¹¹
    ///    or more (milliseconds), a negative one (no catalog was revised before 1970), or one that read
    ///    as seconds is more than a day after `generated`, says milliseconds. Otherwise the times are seconds. `updated` never decides otherwise: times of
    ///    2023 in seconds stay seconds beside `updated` values in milliseconds.
    ///
    /// - Parameters:
    ///   - times: the raw `time` values of the features that have one.
    ///   - updated: the raw `updated` values of the features that have one.
    ///   - generated: `metadata.generated` in milliseconds, when present.
    ///   - afterRevision: whether some feature's time read as seconds comes more than a day after its
    ///     own `updated` in milliseconds (``timeAfterRevisionAsSeconds(time:updated:)``).
    static func detectTimeUnit(
        times: [Double], updated: [Double] = [], generatedMilliseconds generated: Double?,
        afterRevision: Bool = false
    ) -> TimeUnit {
        guard !times.isEmpty else { return .milliseconds }
        var latest = -Double.infinity
        var negative = false
        for time in times {
            if abs(time) >= secondsThreshold || time < earliestSeconds { return .milliseconds }
            latest = max(latest, time)
            negative = negative || time < 0
        }
        if let generated, latest * 1000 > generated + oneDayInMilliseconds { return .milliseconds }
        if afterRevision { return .milliseconds }
        if negative || latest < smallTime {
            for value in updated where abs(value) >= secondsThreshold || value < 0 { return .milliseconds }
            // A revision read as seconds after the feed was generated: the small values are milliseconds.
            if let generated, let newest = updated.max(), newest * 1000 > generated + oneDayInMilliseconds {
                return .milliseconds
            }
        }
        return .seconds
    }

    /// The units of a feed's `time` and `updated` values: both that of the times
    /// (`detectTimeUnit(times:updated:generatedMilliseconds:)`), but an `updated` value of 10¹¹ or more
    /// is milliseconds and never scaled (``TimeUnits``), so times in seconds may have revisions in
    /// milliseconds. (Times in milliseconds with revisions in seconds are not recognised: the revisions
    /// read as 1970–1973.)
    static func detectTimeUnits(
        times: [Double], updated: [Double], generatedMilliseconds generated: Double?,
        afterRevision: Bool = false
    )
        -> TimeUnits
    {
        let time = detectTimeUnit(
            times: times, updated: updated, generatedMilliseconds: generated, afterRevision: afterRevision)
        return TimeUnits(time: time, updated: time)
    }

    /// Whether one feature's `time`, read as seconds, is more than a day after its own `updated` when
    /// that is in milliseconds beyond doubt (10¹¹ or more, never scaled): impossible, as no event
    /// happens after its revision, so the feed's small times are milliseconds.
    static func timeAfterRevisionAsSeconds(time: Double?, updated: Double?) -> Bool {
        guard let time, let updated, abs(time) < secondsThreshold, updated >= secondsThreshold else {
            return false
        }
        return time * 1000 > updated + oneDayInMilliseconds
    }

    /// How many values the units convert from seconds (for the warning): every time when the times are
    /// seconds; else the `updated` values below 10¹¹ when those are.
    static func convertedCount(times: [Double], updated: [Double], units: TimeUnits) -> Int {
        if units.time == .seconds { return times.count }
        return units.updated == .seconds ? updated.count { abs($0) < secondsThreshold } : 0
    }

    /// `metadata.generated` in milliseconds: the USGS gives milliseconds; a value below 10¹¹
    /// (before 1973 in milliseconds, long before GeoJSON feeds existed) is read as seconds.
    static func generatedMilliseconds(_ raw: Double?) -> Double? {
        guard let raw else { return nil }
        return abs(raw) < secondsThreshold ? raw * 1000 : raw
    }
}
