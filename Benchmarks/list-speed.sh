#!/usr/bin/env bash
# `earthquakes list` against the sqlite3 shell over the same rows (issue 10, defect 10).
#
# Builds the tool in release mode, makes a database of N events (the recorded USGS feeds in
# ../shared/data when present, else the built-in sample, replicated with new ids and times), then
# times, best of R runs, output to /dev/null:
#   - sqlite3 DB "SELECT <the columns list reads> … ORDER BY time DESC, id"   (the peer)
#   - earthquakes list --all                                                 (the table)
#   - earthquakes list --all --csv
#   - earthquakes list --near -33.9,151.2 (20 nearest), with its peak memory
# and prints one JSON line per measurement plus the ratios. Nothing is asserted about time.
#
#     Benchmarks/list-speed.sh            # 200,000 rows, best of 5
#     Benchmarks/list-speed.sh --quick    # 50,000 rows, best of 3 (CI)
set -euo pipefail
cd "$(dirname "$0")/.."

rows=200000
runs=5
if [ "${1:-}" = "--quick" ]; then
    rows=50000
    runs=3
fi

if ! command -v sqlite3 > /dev/null; then
    echo '{"benchmark":"earthquakes-list","skipped":"the sqlite3 shell (the peer) is not installed: apt-get install sqlite3"}'
    exit 0
fi

# Built by the benchmark package (the tool is a product of Baton's), beside the benchmarks' release build.
swift build -c release --package-path Benchmarks --product earthquakes 2>&1 | grep -E "error|warning: " || true
tool="$(swift build -c release --package-path Benchmarks --show-bin-path)/earthquakes"
work=$(mktemp -d "${TMPDIR:-/tmp}/list-speed.XXXXXX")
trap 'rm -rf "$work"' EXIT
db="$work/quakes.sqlite"

# Seed events: real feeds if the shared data is here, else the sample (imported into a database of its own).
seeded=0
for feed in ../shared/data/usgs/*.geojson; do
    [ -f "$feed" ] || continue
    "$tool" refresh --feed "$feed" --database "$db" > /dev/null
    seeded=1
done
if [ "$seeded" = 0 ]; then
    # Without the recorded feeds: a feed of 200 made-up events, written here and imported by the tool.
    feed="$work/seed.geojson"
    {
        printf '{"type":"FeatureCollection","metadata":{"generated":1764000000000,"count":200,"title":"list-speed seed"},"features":['
        for i in $(seq 0 199); do
            [ "$i" -gt 0 ] && printf ','
            printf '{"type":"Feature","id":"seed%d","properties":{"mag":%d.%d,"place":"%d km NNW of Seed Town, CA","time":%d,' \
                "$i" $((i % 7)) $((i % 10)) $((i % 90 + 1)) $((1764000000000 - i * 3600000))
            printf '"updated":%d,"tz":null,"url":"https://example.invalid/seed%d","felt":null,"cdi":null,"mmi":null,' \
                $((1764000000000 - i * 3600000)) "$i"
            printf '"alert":null,"status":"reviewed","tsunami":0,"sig":%d,"net":"ci","code":"seed%d","magType":"ml",' \
                $((i * 3)) "$i"
            printf '"type":"earthquake","title":"M %d.%d - %d km NNW of Seed Town, CA"},' $((i % 7)) $((i % 10)) $((i % 90 + 1))
            printf '"geometry":{"type":"Point","coordinates":[%d.%02d,%d.%02d,%d.5]}}' \
                $((-170 + i % 340)) $((i % 100)) $((-60 + i % 120)) $((i * 7 % 100)) $((i % 30))
        done
        printf ']}'
    } > "$feed"
    "$tool" refresh --feed "$feed" --database "$db" > /dev/null
fi
seed=$(sqlite3 "$db" "SELECT COUNT(*) FROM earthquake")
copies=$(( (rows + seed - 1) / seed - 1 ))
sqlite3 "$db" "
    WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < $copies)
    INSERT INTO earthquake (id, latitude, longitude, depth, magnitude, magnitudeType, place, time, updated,
        timeZoneOffset, url, detailURL, felt, cdi, mmi, alert, status, tsunami, significance, network, code, type, title)
    SELECT id || '-' || k, latitude, longitude, depth, magnitude, magnitudeType, place, time - k * 3600000, updated,
        timeZoneOffset, url, detailURL, felt, cdi, mmi, alert, status, tsunami, significance, network, code, type, title
    FROM earthquake, n;
    DELETE FROM earthquake WHERE rowid IN (SELECT rowid FROM earthquake ORDER BY time LIMIT max(0, (SELECT COUNT(*) FROM earthquake) - $rows));
    VACUUM;"
count=$(sqlite3 "$db" "SELECT COUNT(*) FROM earthquake")

# Best wall time and best CPU time (user + system) of $runs runs, in milliseconds: "wall cpu".
# CPU time is the steadier of the two on a shared machine; it needs GNU time (else "null").
best_ms() {
    local best="" best_cpu="" start end ms cpu
    for _ in $(seq "$runs"); do
        start=$(date +%s%N)
        if [ -x /usr/bin/time ]; then
            cpu=$( { /usr/bin/time -f "%U %S" "$@" > /dev/null; } 2>&1 | tail -n 1 | awk '{ printf "%d", ($1 + $2) * 1000 }')
        else
            "$@" > /dev/null
            cpu=""
        fi
        end=$(date +%s%N)
        ms=$(( (end - start) / 1000000 ))
        if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
        if [ -n "$cpu" ] && { [ -z "$best_cpu" ] || [ "$cpu" -lt "$best_cpu" ]; }; then best_cpu=$cpu; fi
    done
    echo "$best ${best_cpu:-null}"
}

# Peak resident memory in KB (GNU time), or "null" when it is not installed.
peak_kb() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%M" "$@" 2>&1 > /dev/null | tail -n 1
    else
        echo null
    fi
}

query="SELECT id, time, magnitude, depth, latitude, longitude, place, title, type FROM earthquake ORDER BY time DESC, id"
read -r sqlite_ms sqlite_cpu < <(best_ms sqlite3 "$db" "$query")
read -r table_ms table_cpu < <(best_ms "$tool" list --all --database "$db")
read -r csv_ms csv_cpu < <(best_ms "$tool" list --all --csv --database "$db")
read -r near_ms near_cpu < <(best_ms "$tool" list --near -33.9,151.2 --database "$db")
table_kb=$(peak_kb "$tool" list --all --database "$db")
near_kb=$(peak_kb "$tool" list --near -33.9,151.2 --database "$db")
lines=$("$tool" list --all --database "$db" | wc -l)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "null" && b > 0) printf "%.2f", a / b; else print "null" }'; }
echo "{\"benchmark\":\"earthquakes-list\",\"peer\":\"sqlite3\",\"rows\":$count,\"runs\":$runs,\"ms\":$sqlite_ms,\"cpuMs\":$sqlite_cpu}"
echo "{\"benchmark\":\"earthquakes-list\",\"tool\":\"list --all\",\"rows\":$count,\"lines\":$lines,\"runs\":$runs,\"ms\":$table_ms,\"cpuMs\":$table_cpu,\"peakKB\":$table_kb,\"ratioToSqlite3\":$(ratio "$table_ms" "$sqlite_ms"),\"cpuRatioToSqlite3\":$(ratio "$table_cpu" "$sqlite_cpu")}"
echo "{\"benchmark\":\"earthquakes-list\",\"tool\":\"list --all --csv\",\"rows\":$count,\"runs\":$runs,\"ms\":$csv_ms,\"cpuMs\":$csv_cpu,\"ratioToSqlite3\":$(ratio "$csv_ms" "$sqlite_ms"),\"cpuRatioToSqlite3\":$(ratio "$csv_cpu" "$sqlite_cpu")}"
echo "{\"benchmark\":\"earthquakes-list\",\"tool\":\"list --near (20 nearest)\",\"rows\":$count,\"runs\":$runs,\"ms\":$near_ms,\"cpuMs\":$near_cpu,\"peakKB\":$near_kb}"
echo "list --all: $(ratio "$table_ms" "$sqlite_ms")x sqlite3's wall time, $(ratio "$table_cpu" "$sqlite_cpu")x its CPU time, over $count rows (target: at most 1.5x; with few rows the tool's ~0.1 s start-up dominates)"
