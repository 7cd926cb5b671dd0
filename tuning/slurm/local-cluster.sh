#!/usr/bin/env bash
# A real Slurm cluster on this one host, running the project's sbatch file for real:
#
#   NODES=4 OUT=dir bash tuning/slurm/local-cluster.sh
#
# Installs Debian's slurm-wlm and munge where missing (needs root), brings up munged,
# slurmctld and slurmd with a one-node configuration in a temporary folder, starts a
# `ringperf sim`, submits tuning/deploy/ringperf.sbatch with NODES tasks writing under
# OUT/job, waits for it, and prints the merged report's path. The same load then runs in one
# process (OUT/single) and the two are compared figure by figure. The cluster is taken down
# whatever happens; the exit status is non-zero when any step fails or a figure differs by
# more than 1%.
#
# NETNS=1 runs each task in a network namespace of its own (veth pairs on a bridge, each task
# its own address, the simulator at 10.77.0.1), so that --start-at and the merge meet separate
# network stacks. RINGPERF names the binary (default: ringperf on PATH); LOAD the load's flags.
set -euo pipefail

NODES=${NODES:-4}
OUT=${OUT:-$PWD/ringperf-slurm}
RINGPERF=$(command -v "${RINGPERF:-ringperf}") || { echo "local-cluster: no ringperf binary (set RINGPERF)" >&2; exit 1; }
LOAD=${LOAD:---streaming --concurrency 8 --request-count 400 --output-tokens-mean 16 --random-seed 7}
here=$(cd "$(dirname "$0")" && pwd)
sbatch_file=$here/../deploy/ringperf.sbatch

say() { echo "local-cluster: $*" >&2; }
fail() { say "$*"; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

work=$(mktemp -d /tmp/ringperf-slurm.XXXXXX)
pids=()
namespaces=()
teardown() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    for n in "${namespaces[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    if [ "${NETNS:-0}" = 1 ]; then ip link del rpbr0 2>/dev/null || true; fi
    rm -rf "$work"
}
trap teardown EXIT

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    local limit=$1
    shift
    for ((i = 0; i < limit * 10; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

# munge: a key of its own, a socket in the work folder.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
munged --force --foreground --key-file="$work/munge.key" --socket="$work/munge.socket" \
    --pid-file="$work/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munge.seed" \
    2>"$work/munged.err" &
pids+=($!)
wait_for 10 test -S "$work/munge.socket" || fail "munged did not start: $(cat "$work/munged.log" 2>/dev/null)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
# A place for every task, however few the CPUs (config_overrides lets the node say more).
cpus=$(( NODES > $(nproc) ? NODES : $(nproc) ))
mkdir -p "$work/state" "$work/spool"
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=ringperf-local
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
SlurmdParameters=config_overrides
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:$NODES
CONF
slurmctld -D -f "$SLURM_CONF" 2>"$work/slurmctld.err" &
pids+=($!)
slurmd -D -f "$SLURM_CONF" 2>"$work/slurmd.err" &
pids+=($!)
wait_for 60 bash -c 'sinfo -h -o %T | grep -qx idle' ||
    fail "the node did not come up: $(tail -5 "$work/slurmctld.log" "$work/slurmd.log" 2>/dev/null)"
say "cluster up: $(sinfo -h -o '%P %D node(s) %c CPUs %T')"

sim_ip=127.0.0.1
if [ "${NETNS:-0}" = 1 ]; then
    # One bridge on this side, one namespace per task with a veth pair onto it.
    ip link add rpbr0 type bridge
    ip addr add 10.77.0.1/24 dev rpbr0
    ip link set rpbr0 up
    for ((i = 0; i < NODES; i++)); do
        ns=ringperf-node-$i
        ip netns add "$ns"
        namespaces+=("$ns")
        ip link add "rpv$i" type veth peer name "rpv${i}n"
        ip link set "rpv${i}n" netns "$ns"
        ip link set "rpv$i" master rpbr0 up
        ip netns exec "$ns" ip addr add "10.77.0.$((10 + i))/24" dev "rpv${i}n"
        ip netns exec "$ns" ip link set "rpv${i}n" up
        ip netns exec "$ns" ip link set lo up
    done
    export RINGPERF_NETNS=ringperf-node-
    sim_ip=10.77.0.1
    say "$NODES network namespaces, 10.77.0.10 to 10.77.0.$((9 + NODES)), on bridge rpbr0"
fi
"$RINGPERF" sim --bind "$sim_ip:0" --ttft 100ms --itl 10ms >"$work/sim.port" 2>"$work/sim.log" &
pids+=($!)
wait_for 20 test -s "$work/sim.port" || fail "the simulator did not start: $(cat "$work/sim.log")"
url=http://$sim_ip:$(head -1 "$work/sim.port")

rm -rf "$OUT/job" "$OUT/single"
mkdir -p "$OUT"
say "sbatch: $NODES tasks of ringperf profile $LOAD"
# One host holds every task: the file's --nodes and --ntasks-per-node give way to the
# command line's.
# shellcheck disable=SC2086 # LOAD is a list of flags
sbatch --wait --quiet --nodes=1 --ntasks="$NODES" --ntasks-per-node="$NODES" --output="$OUT/slurm-%j.out" \
    --export=ALL,TARGET_URL="$url",RINGPERF="$RINGPERF",OUT="$OUT/job",START_IN=3 \
    "$sbatch_file" $LOAD || fail "the job failed: $(cat "$OUT"/slurm-*.out 2>/dev/null | tail -20)"
test -f "$OUT/job/merged/profile_export_ringperf.json" || fail "no merged report in $OUT/job/merged"
say "merged report: $OUT/job/merged/report.html"

say "the same load in one process"
# shellcheck disable=SC2086
"$RINGPERF" profile --no-progress --url "$url" --artifact-dir "$OUT/single" $LOAD >/dev/null \
    2>"$OUT/single.log" || fail "the single process failed: $(tail -3 "$OUT/single.log")"

python3 - "$OUT/job/merged/profile_export_ringperf.json" "$OUT/single/profile_export_ringperf.json" "$NODES" <<'PY'
import json, sys
merged, single = (json.load(open(p)) for p in sys.argv[1:3])
nodes = int(sys.argv[3])
rows = [("request_count", "avg"), ("error_request_count", "avg"),
        ("time_to_first_token", "p50"), ("time_to_first_token", "p99"),
        ("inter_token_latency", "p50"), ("inter_token_latency", "p99"),
        ("request_latency", "p50"), ("request_latency", "p99"),
        ("output_token_throughput", "avg"), ("request_throughput", "avg")]
worst = 0.0
print(f"{'figure':<32} {'%d tasks merged' % nodes:>16} {'1 process':>12} {'diff':>7}")
for k, s in rows:
    a, b = merged[k][s], single[k][s]
    d = abs(a - b) / abs(b) if b else abs(a)
    worst = max(worst, d)
    print(f"{k + ' ' + s:<32} {a:>16.3f} {b:>12.3f} {d * 100:>6.2f}%")
m = merged["merge"]
print(f"tasks merged: {m['nodes_merged']} of {m['node_count']}, start skew {m['start_skew_ms']:.3f} ms")
if m["nodes_merged"] != nodes or m["incomplete"]:
    sys.exit("local-cluster: a task is missing from the merge")
if worst > 0.01:
    sys.exit(f"local-cluster: the merged figures differ from one process by up to {worst * 100:.2f}%")
PY
