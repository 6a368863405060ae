#!/usr/bin/env bash
# Mixed-speed training on one GPU: two domains (two processes) under CUDA
# MPS, each limited to a share of the SMs, as two vendors' GPUs of
# different speeds would be. For each SM split: solo (both train at once,
# no communication: the ideal is the sum), equal batches, balanced batches
# (hetccl.torch), REPEATS alternating runs; then efficiency = samples/s of
# the job / sum of the solo samples/s (medians), and the losses of the
# balanced run against one process over the same global batches.
# A share "cpu" makes that rank a CPU rank (HETCCL_DEVICE=host), and the
# job's gradients go through hetccl.torch.ProcessGroup (--backend hetccl):
# SPLITS="100:cpu" is one whole-GPU rank beside a CPU rank.
# MODES (default "solo equal balanced") may add nocomm: DDP without its
# gradient all-reduce, the ceiling of any exchange.
# SLOWDOWN=STEP:RANK:FACTOR adds, on the first split, equal and balanced
# runs in which a rank turns FACTOR times slower at STEP (traced step by
# step: shares.png plots the shares and the samples/s against the step),
# and a solo run timed from STEP on, the ideal after the slowdown; with
# MODES="" only those run (and the reference).
#
#   bench/mixed_training.sh [build-dir]     # SPLITS="70:30 80:20 50:50" REPEATS=3 ARGS="--steps 40" SLOWDOWN=30:0:3
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build-gpu}")
out=${OUT:-$PWD/mixed-results}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
source bench/mps.sh
args=${ARGS:-}
port=29611

run() {  # run MODE SPLIT FILE [ARGS...]: one job, a process per rank with its SM share
  local mode=$1 split=$2 file=$3 rank=0 pids=() share
  shift 3
  port=$((port + 1))
  local world=$(wc -w <<< "${split//:/ }") where backend=()
  [[ $split == *cpu* ]] && backend=(--backend hetccl)
  for share in ${split//:/ }; do
    if [ "$share" = cpu ]; then  # a CPU rank: no GPU in sight, the host's cores less two
      where=(HETCCL_DEVICE=host CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=$(( $(nproc) > 4 ? $(nproc) - 2 : 2 )))
    else
      where=(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="$share")
    fi
    env LD_PRELOAD="$build/libhetccl.so" HETCCL_DOMAIN="d$rank" "${where[@]}" \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$rank WORLD_SIZE=$world LOCAL_RANK=0 \
      timeout 300 python3 examples/train_mixed.py --mode "$mode" --out "$file" $args "${backend[@]}" "$@" \
      > "$file.rank$rank.log" 2>&1 &
    pids+=($!)
    rank=$((rank + 1))
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || { echo "$mode $split failed:"; tail -n 5 "$file".rank*.log; }
}

for split in ${SPLITS:-70:30}; do
  for i in $(seq "${REPEATS:-3}"); do
    for mode in ${MODES-solo equal balanced}; do
      run $mode "$split" "$out/${split/:/-}_${mode}_$i.json"
    done
  done
done
if [ -n "${SLOWDOWN:-}" ]; then
  split=${SPLITS%% *}
  for mode in equal balanced; do
    run $mode "$split" "$out/slowdown_${mode}.json" --slowdown "$SLOWDOWN" --trace
  done
  # the ideal after the slowdown: both ranks alone, timed from the slowdown on
  run solo "$split" "$out/slowdown_solo.json" --slowdown "$SLOWDOWN" --warmup-steps "${SLOWDOWN%%:*}"
fi
LD_PRELOAD="$build/libhetccl.so" timeout 300 python3 examples/train_mixed.py --mode reference --out "$out/reference.json" $args \
  > "$out/reference.log" 2>&1 || tail -5 "$out/reference.log"
python3 - "$out" "${SLOWDOWN:-}" <<'PY' | tee "$out/results.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
def load(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, pattern)))]
ref = json.load(open(os.path.join(out, "reference.json")))["losses"] if os.path.exists(os.path.join(out, "reference.json")) else None
modes = [m for m in ("nocomm", "equal", "balanced") if glob.glob(os.path.join(out, f"*_{m}_*.json"))]
print("| SM shares | solo sum (samples/s) | " + " | ".join(modes) + " | balanced shares | all-reduce calls (ms/step) | loss vs reference |")
print("| --- | ---: | " + " | ".join("---:" for _ in modes) + " | --- | --- | --- |")
for split in sorted({os.path.basename(f).split("_")[0] for f in glob.glob(os.path.join(out, "*_solo_*.json"))}):
    solo = statistics.median(r["sum_samples_per_s"] for r in load(f"{split}_solo_*.json"))
    cells = []
    for m in modes:
        rate = statistics.median(r["samples_per_s"] for r in load(f"{split}_{m}_*.json"))
        cells.append(f"{rate:.0f} ({rate / solo:.2f})")
    runs = load(f"{split}_balanced_*.json")
    shares = runs[0]["final_counts"] if runs else "-"
    calls = "/".join(f"{v:.2f}" for v in runs[0].get("allreduce_call_ms_per_step", [])) if runs else "-"
    diff = "-"
    if ref and runs:
        diff = f"max rel {max(abs(a - b) / abs(b) for a, b in zip(runs[0]['losses'], ref)):.1e}"
    print(f"| {split.replace('-', '/')} | {solo:.0f} | " + " | ".join(cells) + f" | {shares} | {calls} | {diff} |")
slow = {m: os.path.join(out, f"slowdown_{m}.json") for m in ("equal", "balanced")}
if all(os.path.exists(f) for f in slow.values()):
    runs = {m: json.load(open(f)) for m, f in slow.items()}
    at = int(sys.argv[2].split(":")[0]) if len(sys.argv) > 2 and sys.argv[2] else 1
    solo_file = os.path.join(out, "slowdown_solo.json")
    solo = json.load(open(solo_file))["sum_samples_per_s"] if os.path.exists(solo_file) else None
    print(f"\n| slowdown run | samples/s (after warm-up) | samples/s from step {at} on | of the solo sum then "
          f"({solo or 0:.0f}) | final shares |")
    print("| --- | ---: | ---: | ---: | --- |")
    for m, r in runs.items():
        ends = r["step_ends"]  # each step's end; steps at.. end after ends[at - 1]
        after = r["global_batch"] * (len(ends) - at) / (ends[-1] - ends[at - 1])
        share = f"{after / solo:.2f}" if solo else "-"
        print(f"| {m} | {r['samples_per_s']:.0f} | {after:.0f} | {share} | {r['final_counts']} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib here: no plot)")
    else:
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
        for m, r in runs.items():
            ends = r["step_ends"]
            rate = [r["global_batch"] / (b - a) for a, b in zip(ends, ends[1:])]
            bottom.plot(range(1, len(ends)), rate, label=m)
        counts = runs["balanced"]["counts_by_step"]
        for rank in range(len(counts[0])):
            top.plot([c[rank] for c in counts], label=f"rank {rank}")
        top.set_ylabel("share of the global batch (balanced)")
        bottom.set_ylabel("samples/s")
        bottom.set_xlabel("step")
        top.legend()
        bottom.legend()
        fig.savefig(os.path.join(out, "shares.png"), dpi=100)
PY
# One file of logs and one of results, so that few files come back from the device.
(cd "$out" && tail -n +1 -- *.log > logs.txt && python3 -c "
import glob, json
print(json.dumps({f: json.load(open(f)) for f in sorted(glob.glob('*_*.json') + glob.glob('reference.json'))}))" > runs.tmp \
  && mv runs.tmp runs.json && rm -f -- *.log ./*_*.json reference.json)
