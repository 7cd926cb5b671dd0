#!/usr/bin/env bash
# The long fuzz campaign: every cargo-fuzz target in tests/fuzz, RUNS inputs each (default 10^7),
# coverage-guided (libFuzzer, nightly), from the committed seeds in tests/fuzz/seeds. Prints one
# line per target: inputs run, coverage reached, crashes found (each saved under
# tests/fuzz/artifacts/TARGET/ to be turned into a test).
#
#   bench/fuzz.sh [RUNS] [TARGET...]      e.g. bench/fuzz.sh 10000000
#   bench/fuzz.sh --seeds                 remake tests/fuzz/seeds from tests/data/captures
#
# The seeds are the real captures whole, their bodies alone (what follows the head), and pairs
# of consecutive event documents (a shape learned from the first, matched against the second).
# Targets run two at a time (JOBS=2); MAX_TIME=SECONDS stops each target sooner (the line then
# says how many inputs it ran). SANITIZER=none builds without AddressSanitizer (the parsers are
# safe Rust: openai runs about 2,700 inputs a second here against 1,200; the default is address). The corpus each one
# grows stays under target/fuzz-corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

seeds() {
    local out=tests/fuzz/seeds
    rm -rf "$out" && mkdir -p "$out"
    for f in tests/data/captures/*/*; do
        local name
        name=$(basename "$(dirname "$f")")-$(basename "$f")
        cp "$f" "$out/$name"
        # The body: everything after the head's blank line.
        if grep -aq $'^\r$' "$f"; then
            sed '1,/^\r$/d' "$f" >"$out/$name.body"
        fi
        # Pairs of consecutive event documents, every 16th event.
        { grep -a '^data: {' "$f" || true; } | sed 's/^data: //; s/\r$//' |
            awk -v base="$out/$name.pair" 'NR % 16 == 1 { first = $0; if ((getline second) > 0) { n++; print first "\n" second > (base n) } }'
    done
    echo "seeds: $(ls "$out" | wc -l) files in $out"
}

if [ "${1:-}" = "--seeds" ]; then
    seeds
    exit 0
fi

RUNS=${1:-10000000}
shift || true
JOBS=${JOBS:-2}
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    mapfile -t TARGETS < <(sed -n 's/^name = "\(.*\)"$/\1/p' tests/fuzz/Cargo.toml | grep -v '^ringperf-fuzz$')
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
SANITIZER=${SANITIZER:-address}
cargo +nightly fuzz build --fuzz-dir tests/fuzz -O -s "$SANITIZER" 2>&1 | tail -1

run_one() {
    local t=$1 corpus=target/fuzz-corpus/$1 log=target/fuzz-logs/$1.log
    mkdir -p "$corpus" target/fuzz-logs
    local start=$SECONDS rc=0
    cargo +nightly fuzz run --fuzz-dir tests/fuzz -O -s "$SANITIZER" "$t" "$corpus" tests/fuzz/seeds -- \
        -runs="$RUNS" ${MAX_TIME:+-max_total_time=$MAX_TIME} -max_len=16384 -rss_limit_mb=4096 \
        -print_final_stats=1 >"$log" 2>&1 || rc=$?
    local execs cov
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    local crashes
    crashes=$(ls tests/fuzz/artifacts/"$t" 2>/dev/null | wc -l)
    printf '%-20s inputs %-10s cov %-6s crashes %s  exit %s  %ss\n' \
        "$t" "${execs:-?}" "${cov:-?}" "$crashes" "$rc" "$((SECONDS - start))"
}

running=0
for t in "${TARGETS[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait
