#!/usr/bin/env bash
# AIPerf's workload controls at 10,000 streams against the simulator, each checked from the
# artifacts, as the tests check them at small scale:
#   - --prefill-concurrency 1000: the most requests ever between send and first token;
#   - --request-cancellation-rate 50: the share cancelled, and errors (none expected);
#   - --user-centric-rate 2000 --num-users 10000: each user's gaps (5 s asked) and the rate;
#   - --slice-duration 1 over 10 s: the slices written;
# and each run's client verdict.
#
#     bench/workloads.sh [STREAMS]        (default 10000; needs python3)
#
# The simulator runs as a process of its own on CPU 0 (its own descriptors: the client's
# 10,000 connections need 10,000 of the client's), its tokens 50 ms apart: one core writes
# 10,000 streams' events at 200,000 a second. Figures go to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
streams=${1:-10000}
cargo build --release --quiet
bin=target/release/ringperf
out=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
taskset -c 0 "$bin" sim --bind "127.0.0.1:$port" --ttft 50ms --itl 50ms >"$out/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; rm -rf "$out"' EXIT
until grep -qs serving "$out/sim.log"; do sleep 0.1; done
# The client on CPU 1: the two never compete for a CPU.
url="--url http://127.0.0.1:$port -m ringperf-sim --streaming --no-progress --cpus 1"

run() { # NAME FLAGS...
    local name=$1; shift
    "$bin" profile $url "$@" --artifact-dir "$out/$name" >"$out/$name.log" 2>&1
    grep -h '^Verdict' "$out/$name.log" | sed "s/^/$name: /"
}

run prefill --concurrency "$streams" --request-count $((4 * streams)) --output-tokens-mean 30 \
    --prefill-concurrency $((streams / 10))
run cancel --concurrency "$streams" --request-count $((4 * streams)) --output-tokens-mean 30 \
    --request-cancellation-rate 50 --request-cancellation-delay 0.3
run users --user-centric-rate $((streams / 5)) --num-users "$streams" --session-turns-mean 4 \
    --output-tokens-mean 10 --benchmark-duration 15 --grace-period 5
run slices --concurrency "$streams" --benchmark-duration 10 --output-tokens-mean 30 \
    --slice-duration 1

python3 - "$out" "$streams" <<'PY'
import collections, json, sys
out, streams = sys.argv[1], int(sys.argv[2])
def reqs(name):
    with open(f"{out}/{name}/profile_export.jsonl") as f:
        return [json.loads(l)["metadata"] for l in f]
r = reqs("prefill")
edges = sorted([(x["start_ns"], 1) for x in r if x["first_content_ns"]] +
               [(x["first_content_ns"], -1) for x in r if x["first_content_ns"]])
now = most = 0
for _, d in edges:
    now += d; most = max(most, now)
print(f"prefill: cap {streams // 10}, most between send and first token {most}, {len(r)} requests")
c = collections.Counter(x["outcome"] for x in reqs("cancel"))
n = sum(c.values())
print(f"cancel: {c['request_cancelled'] / n:.1%} cancelled of {n}, outcomes {dict(c)}")
u = reqs("users")
by = collections.defaultdict(list)
for x in u:
    by[x["session"]["session_id"]].append(x["start_ns"])
gaps = sorted((b - a) / 1e6 for v in by.values() for a, b in zip(sorted(v), sorted(v)[1:]))
starts = sorted(x["start_ns"] for x in u)
rate = (len(starts) - 1) / ((starts[-1] - starts[0]) / 1e9)
print(f"users: gap asked {streams / (streams // 5) * 1e3:.0f} ms, p1 {gaps[len(gaps) // 100]:.1f} "
      f"p50 {gaps[len(gaps) // 2]:.1f} p99 {gaps[len(gaps) * 99 // 100]:.1f} ms over {len(gaps)} gaps; "
      f"rate {rate:.0f}/s asked {streams // 5}/s")
with open(f"{out}/slices/profile_export_ringperf_timeslices.json") as f:
    s = json.load(f)["timeslices"]
print(f"slices: {len(s)} slices of 1 s over a 10 s run, requests per slice "
      f"{[int(x['request_count']['avg']) for x in s]}")
PY
