import BatonObservability
import Hummingbird

/// The dashboard's stylesheet and its one script, served from `/assets/` (the content security policy
/// allows scripts from the dashboard only, never inline).
enum Assets {
    static func response(_ text: String, type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static let css = """
        body { font: 14px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
        header { display: flex; flex-wrap: wrap; justify-content: space-between; align-items: baseline; gap: 8px; padding: 10px 20px; background: #243447; color: #fff; }
        header a { color: #cfe3ff; margin-right: 14px; text-decoration: none; }
        header a.here { color: #fff; font-weight: bold; border-bottom: 2px solid #fff; }
        header strong { margin-right: 18px; }
        header p.store { margin: 0; font-size: 12px; color: #cfd8e3; overflow-wrap: anywhere; }
        main { padding: 14px 20px 40px; }
        h1 { font-size: 20px; margin: 6px 0 12px; }
        h1 .name { font-weight: normal; overflow-wrap: anywhere; }
        h2 { font-size: 16px; margin: 22px 0 8px; }
        table { border-collapse: collapse; background: #fff; margin-bottom: 8px; }
        th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid #e5e5e5; vertical-align: top; }
        th { font-size: 12px; color: #555; background: #f0f2f5; }
        td.number { text-align: right; font-variant-numeric: tabular-nums; }
        td { overflow-wrap: anywhere; max-width: 520px; }
        a { color: #0b57d0; }
        .badge { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; background: #e0e0e0; }
        .badge.succeeded { background: #d3f0da; color: #145a26; }
        .badge.failed, .badge.lost { background: #fbd5d5; color: #8a1111; }
        .badge.cancelled { background: #eee3c8; color: #6b4b00; }
        .badge.running, .badge.active { background: #d6e6ff; color: #0b3d91; }
        .badge.ready, .badge.pending, .badge.paused { background: #ececec; color: #444; }
        .badge.snoozed { background: #fbecc8; color: #7a5200; }
        .tabs { margin: 0 0 10px; }
        .tab { display: inline-block; margin-right: 6px; padding: 3px 9px; border-radius: 12px; background: #e8ebef; text-decoration: none; color: #333; }
        .tab.here { background: #243447; color: #fff; }
        .tab .count { font-variant-numeric: tabular-nums; opacity: 0.8; }
        form.filter { margin: 0 0 10px; }
        form.action { display: inline-block; margin: 0 8px 8px 0; }
        button { font: inherit; padding: 3px 12px; border: 1px solid #888; border-radius: 4px; background: #fff; cursor: pointer; }
        button.danger { border-color: #b3261e; color: #b3261e; }
        .error { color: #8a1111; }
        .error pre, pre.json { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; font: 12px ui-monospace, Menlo, Consolas, monospace; }
        pre.json { background: #fff; border: 1px solid #e5e5e5; padding: 8px; max-height: 420px; overflow: auto; }
        .notice { background: #e8f3ff; border: 1px solid #9cc3f5; padding: 6px 10px; }
        .empty, .note, .summary, .added { color: #666; }
        .added { font-size: 12px; }
        dl.facts { display: grid; grid-template-columns: max-content auto; gap: 3px 14px; margin: 0 0 12px; }
        dl.facts dt { color: #555; }
        dl.facts dd { margin: 0; overflow-wrap: anywhere; }
        .chart { overflow-x: auto; background: #fff; border: 1px solid #e5e5e5; padding: 6px; }
        svg.graph text { font: 11px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; fill: #1d1d1f; }
        svg.graph .edge { fill: none; stroke: #999; stroke-width: 1; }
        svg.graph .edge.regardless { stroke-dasharray: 4 3; }
        svg.graph .node rect { fill: #ececec; stroke: #999; }
        svg.graph .node.succeeded rect { fill: #d3f0da; stroke: #3c8d50; }
        svg.graph .node.failed rect { fill: #fbd5d5; stroke: #b3261e; }
        svg.graph .node.cancelled rect { fill: #eee3c8; stroke: #8a6d1d; }
        svg.graph .node.running rect { fill: #d6e6ff; stroke: #0b57d0; }
        svg.graph a:hover rect { stroke-width: 2; }
        \(JobTimeline.chartStyle)
        """

    /// While a page shows something that can change (its `[data-live]` section), fetches the page again
    /// every 2 seconds and swaps that section in; stops when the fresh page has none (the run finished)
    /// and skips while the tab is hidden, or while a field of that section has the focus (the runs
    /// page's filter: what was being typed was wiped every 2 seconds). The fetched HTML is the
    /// dashboard's own, escaped like the page. A form whose button has `data-confirm` (delete, cancel)
    /// is sent only once the user confirms.
    static let script = """
        (function () {
          "use strict";
          var every = 2000;
          document.addEventListener("submit", function (event) {
            var button = event.target.querySelector("button[data-confirm]");
            if (button && !window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
          });
          function tick() {
            var live = document.querySelector("[data-live]");
            if (!live) { return; }
            var focused = document.activeElement;
            var typing = focused && live.contains(focused) && /^(INPUT|SELECT|TEXTAREA)$/.test(focused.tagName);
            if (document.visibilityState !== "visible" || typing) { setTimeout(tick, every); return; }
            fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
              .then(function (response) { return response.ok ? response.text() : null; })
              .then(function (text) {
                if (text === null) { setTimeout(tick, every * 5); return; }
                var fresh = new DOMParser().parseFromString(text, "text/html");
                var section = fresh.querySelector("[data-live]");
                if (section) {
                  live.innerHTML = section.innerHTML;
                  setTimeout(tick, every);
                } else {
                  window.location.reload();
                }
              })
              .catch(function () { setTimeout(tick, every * 5); });
          }
          setTimeout(tick, every);
        })();
        """
}
