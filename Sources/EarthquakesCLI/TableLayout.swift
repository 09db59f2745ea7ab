/// The columns of the `list` table, fitted to the width of the terminal that shows it.
///
/// ```
/// TIME (UTC)          MAG  DEPTH km  PLACE                                             ID
/// 2025-10-29 14:02    4.6      10.0  105 km WNW of Höfn, Iceland                       us6000rka0
/// ```
///
/// The time, the magnitude and the id are never shortened: they are what a row is read and looked up
/// by. When the terminal is narrower than the whole table, the place is shortened first (to
/// ``minimumPlaceWidth``); then the depth column is left out, giving its room to the place. An id longer
/// than ``assumedIDWidth`` takes its room from its own row's place. The details (significance, felt
/// reports, intensity, PAGER alert) follow the id, in the room the full table leaves; on a narrower
/// terminal they are left out (`show`, `--csv` and `--json` have them). Without a known width (output to
/// a file or a pipe, no `COLUMNS`), the table has its full width.
///
/// ## Thread safety
/// A `Sendable` value.
struct TableLayout: Sendable, Equatable {
    /// `yyyy-MM-dd HH:mm`.
    static let timeWidth = 16
    /// `  MAG` (the two spaces separate it from the time).
    static let magnitudeWidth = 7
    /// `  DEPTH km`.
    static let depthWidth = 10
    /// `  DIST km`.
    static let distanceWidth = 9
    /// The place's widest column (a longer place is clipped with "…").
    static let fullPlaceWidth = 48
    /// How narrow the place may get before the depth column gives up its room.
    static let minimumPlaceWidth = 16
    /// The width kept for the id: USGS ids have 10 to 12 characters.
    static let assumedIDWidth = 12

    /// Whether the depth column is shown.
    var showsDepth = true
    /// Whether the distance column is shown (`--near`).
    var showsDistance: Bool
    /// The place column's width, in characters.
    var placeWidth = TableLayout.fullPlaceWidth
    /// The terminal's width, when known: no row is wider.
    var width: Int?
    /// The room for the details column after the id (significance, felt reports, intensity, PAGER alert):
    /// `nil` when it is left out (a terminal too narrow for it beside the full place), `Int.max` when the
    /// width is unknown.
    var detailsWidth: Int? = .max
    /// The least room the details column is shown in.
    static let minimumDetailsWidth = 12

    /// The layout for a terminal `width` columns wide (`nil`: unknown, the full table).
    init(width: Int?, distances: Bool) {
        showsDistance = distances
        guard let width, width > 0 else { return }
        self.width = width
        if width - fixedWidth - 2 - Self.assumedIDWidth < Self.minimumPlaceWidth { showsDepth = false }
        placeWidth = min(Self.fullPlaceWidth, max(0, width - fixedWidth - 2 - Self.assumedIDWidth))
        // The details come last: only in the room the full table leaves.
        let room = width - fixedWidth - placeWidth - 2 - Self.assumedIDWidth - 2
        detailsWidth = placeWidth == Self.fullPlaceWidth && room >= Self.minimumDetailsWidth ? room : nil
    }

    /// The columns before the place, with the two spaces before it.
    var fixedWidth: Int {
        Self.timeWidth + Self.magnitudeWidth + (showsDepth ? Self.depthWidth : 0)
            + (showsDistance ? Self.distanceWidth : 0) + 2
    }

    /// The room for the place of a row whose id has `idWidth` characters: an id wider than the one
    /// assumed takes what it needs from its own row (which then fits the width; its id starts earlier).
    func placeWidth(forIDWidth idWidth: Int) -> Int {
        guard let width else { return placeWidth }
        return max(0, min(placeWidth, width - fixedWidth - 2 - idWidth))
    }
}
