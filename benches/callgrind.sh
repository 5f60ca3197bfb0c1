#!/usr/bin/env bash
# Client instructions per W1 lock + unlock pair, counted by callgrind: the library's
# contenders beside the raw hash-script floor, on each tokio runtime flavour. Instruction
# counts do not swing with the machine's load as times do: compare them before and after a
# change to src/.
#
#   benches/callgrind.sh [contenders] [flavours]
#
# contenders: W1 ids, comma-separated (default floor,lock,lease; also setnx, rslock, fair);
# flavours: default current_thread,multi_thread,multi_thread_task.
# Environment: SMALL and LARGE timed pairs (default 200 and 2200), WARMUP (default 200),
# WORKERS for the multi-thread runtime (default 1, as `#[tokio::main]` starts on a client
# pinned to one CPU), OUT for the callgrind files (default target/callgrind), FEATURES for
# the library's cargo features (FEATURES=metrics PROMETHEUS=1: with a Prometheus recorder
# installed, see benches/w1.rs).
#
# Each contender runs alone in its own process, twice: SMALL then LARGE timed pairs after
# the same warm-up. Instructions per pair = (Ir(LARGE) - Ir(SMALL)) / (LARGE - SMALL), so
# start-up, connecting and warm-up cancel out. Every thread of the client counts (the
# runtime's workers, the connection's driver task, the library's background tasks);
# redis-server, started by the benchmark, is not traced. Under callgrind a pair takes about
# 1 ms, so work done on a timer (the unlock latches deleted every 20 ms) falls on fewer
# pairs than at full speed, and weighs more per pair. Inspect where the instructions go
# with `callgrind_annotate --inclusive=yes $OUT/<flavour>.<contender>.<pairs>.out`.
set -euo pipefail
cd "$(dirname "$0")/.."

contenders=${1:-floor,lock,lease}
flavours=${2:-current_thread,multi_thread,multi_thread_task}
small=${SMALL:-200}
large=${LARGE:-2200}
warmup=${WARMUP:-200}
out=${OUT:-target/callgrind}
mkdir -p "$out"

bin=$(nice -n 10 cargo bench --bench w1 --no-run --features "${FEATURES:-}" --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
if [ -z "$bin" ]; then
    echo "could not build benches/w1.rs" >&2
    exit 1
fi

# Instructions of one run: flavour, contender, timed pairs.
instructions() {
    local file="$out/$1.$2.$3.out"
    NO_COUNTERS=1 CONTENDERS=$2 FLAVOURS=$1 PLACEMENTS=none PAIRS=$3 WARMUP=$warmup WORKERS=${WORKERS:-1} \
        timeout 1800 valgrind --tool=callgrind --callgrind-out-file="$file" "$bin" \
        >"$file.stdout" 2>"$file.log"
    awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

echo "callgrind: client instructions per W1 pair ($small and $large timed pairs after $warmup warm-up)"
printf '%-18s %-8s %14s %9s %14s\n' flavour contender "Ir/pair" "×floor" "over floor"
IFS=, read -ra flavour_list <<<"$flavours"
IFS=, read -ra contender_list <<<"$contenders"
for flavour in "${flavour_list[@]}"; do
    floor=""
    for contender in "${contender_list[@]}"; do
        a=$(instructions "$flavour" "$contender" "$small")
        b=$(instructions "$flavour" "$contender" "$large")
        per_pair=$(((b - a) / (large - small)))
        if [ "$contender" = floor ]; then
            floor=$per_pair
        fi
        if [ -n "$floor" ]; then
            ratio=$(awk -v x="$per_pair" -v f="$floor" 'BEGIN { printf "%.3f", x / f }')
            over=$((per_pair - floor))
        else
            ratio="—"
            over="—"
        fi
        printf '%-18s %-8s %14d %9s %14s\n' "$flavour" "$contender" "$per_pair" "$ratio" "$over"
    done
done
