#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU and driver (run from the repository root):
# NVML found, ringperf sampling for 20 s while a GPU load runs, and the energy counter's delta
# compared with average power × duration (they should agree within 5%).
#
#     bash bench/gpu-check.sh            # needs cargo; uses PyTorch for the load if present
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}/gpu-check
mkdir -p "$out"
cargo build --release --quiet
nvidia-smi --query-gpu=index,name,power.draw,power.limit --format=csv || true

# A GPU load for the whole run: matrix multiplies with PyTorch when it is installed.
load_pid=
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 26
while time.time() < end:
    for _ in range(50):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
PY
    load_pid=$!
    sleep 3
else
    echo "PyTorch with CUDA not found: sampling an idle GPU"
fi

./target/release/ringperf profile --sim="--ttft 20ms --itl 10ms" --streaming --concurrency 64 \
    --benchmark-duration 20s --grace-period 5s --output-tokens-mean 128 --no-progress \
    --gpu-sample-interval 100ms --gpu-price-eur-hour 2.5 --artifact-dir "$out/artifacts" \
    | tee "$out/console.txt"
[ -n "$load_pid" ] && wait "$load_pid" || true

python3 - "$out/artifacts" <<'PY'
import json, sys
d = sys.argv[1]
doc = json.load(open(f"{d}/profile_export_ringperf.json"))
g = doc["gpu_telemetry"]
if g.get("unavailable"):
    sys.exit(f"NVML unavailable: {g['unavailable']}")
window = doc["measured_window_s"]
ok = True
for gpu in g["gpus"]:
    e = gpu["energy_j"]
    p = gpu["power_w"]["avg"]
    est = p * gpu["covered_s"]
    diff = abs(e - est) / est if est else float("nan")
    ok &= diff <= 0.05
    print(f"GPU {gpu['index']} {gpu['name']}: energy {e:.1} J ({gpu['energy_source']}), "
          f"avg power {p:.1} W × {gpu['covered_s']:.2} s = {est:.1} J, differ by {diff*100:.2}%, "
          f"{gpu['samples']} samples in a {window:.2} s window")
print("totals:", json.dumps(g["totals"]))
print("sampler CPU share:", g["sampler_cpu_share"])
lines = sum(1 for _ in open(f"{d}/gpu_telemetry_export.jsonl"))
print(f"gpu_telemetry_export.jsonl: {lines} samples")
sys.exit(0 if ok else 1)
PY
