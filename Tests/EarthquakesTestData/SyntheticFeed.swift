public import Foundation

/// Feeds made up for tests that need many features and no recording.
public enum SyntheticFeed {
    /// A USGS-shaped GeoJSON feed of `count` M2.5 features with ids `ev0`, `ev1`, … at the same time
    /// (2023-11-14 22:13:20 UTC) and place.
    public static func data(_ count: Int) -> Data {
        let features = (0..<count).map { index in
            #"{"type":"Feature","properties":{"mag":2.5,"time":1700000000000,"updated":1700000000000},"#
                + #""geometry":{"type":"Point","coordinates":[-117.5,35.25,5]},"id":"ev\#(index)"}"#
        }
        return Data(
            (#"{"type":"FeatureCollection","metadata":{"count":\#(count)},"features":["#
                + features.joined(separator: ",") + "]}").utf8)
    }
}
