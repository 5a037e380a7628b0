#!/bin/bash
# H200 call (session 11), after scripts/gpu_proof in the same call, on its CUDA build: H24 (round3_hypotheses.md):
# a hybrid MoE (the Qwen3.5-35B-A3B shape: 30 Gated DeltaNet + 10 attention layers, 256 experts) on the GPU and split
# by --n-cpu-moe (Q4_K experts in RAM), then CPU only (-ngl 0) with the Llama 3.1 8B shape beside it, then tunehost's
# RAM measurement right after. Run as:
#   run(command="T0=$(date +%s); scripts/gpu_proof; T0=$T0 bash .gpu-run/run9.sh", carry=[".gpu-proof"], timeout_s=600)
# Every step is bounded; none starts after 575 s from T0 (the snapshot keeps 28 s); output in $OUT/run9.tar.gz.
export PYTHONUNBUFFERED=1
R=$PWD; O=/tmp/o9; mkdir -p $O /tmp/shapes
T0=${T0:-$(date +%s)}
W=/tmp/gpu-proof-work
PY=$W/venv/bin/python; [ -x $PY ] || PY=python3
BIN=$W/cache/llama.cpp/0.3.36-cuda/bin
finish() { cd /tmp && tar czf $OUT/run9.tar.gz o9; }
trap finish EXIT
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( 575 - $(el) )); }
echo "run9 start at $(el)s; bin: $(ls $BIN 2>&1 | tr '\n' ' ')" | tee $O/log.txt
[ -x $BIN/llama-bench ] || { echo "no llama-bench: gpu_proof's build is missing" | tee -a $O/log.txt; exit 1; }
nproc > $O/nproc.txt; free -m > $O/free.txt; lscpu > $O/lscpu.txt 2>&1
shape() {  # name, seconds at most
  l=$(( $(left) - 28 )); lim=$2; [ $lim -gt $l ] && lim=$l
  [ $lim -lt 10 ] && { echo "shape $1 skipped: $l s left" | tee -a $O/log.txt; return; }
  (cd /tmp && PYTHONPATH=$R timeout $lim $PY $R/scripts/llama_memory_check.py --only $1 --write-models /tmp/shapes \
    --quant Q4_K --bin-dir $BIN) >> $O/shape.log 2>&1
  echo "shape $1 rc=$? $(el)s" | tee -a $O/log.txt
}
bench() {  # name, seconds at most, then llama-bench's arguments
  name=$1; lim=$2; shift 2
  l=$(( $(left) - 28 )); [ $l -lt 12 ] && { echo "$name skipped: $l s left" | tee -a $O/log.txt; return; }
  [ $lim -gt $l ] && lim=$l
  timeout -k 3 $lim $BIN/llama-bench "$@" -p 0 -o json > $O/$name.json 2> $O/$name.err
  echo "$name rc=$? $(el)s" | tee -a $O/log.txt
}
E8=$W/shapes/llama-3.1-8b.gguf
nvidia-smi --query-gpu=timestamp,pstate,power.draw,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
shape qwen3.5-35b-a3b 50
Q=/tmp/shapes/qwen3.5-35b-a3b.gguf
bench q35 80 -m $Q -ngl 99 -ncmoe 0,10,20,40 -t 16 -n 64 -r 2
bench q35c 40 -m $Q -ngl 0 -t 16 -n 32 -r 2
[ -f $E8 ] && bench d8c 30 -m $E8 -ngl 0 -t 16 -n 32 -r 2
kill $SMI 2>/dev/null
# the RAM bandwidth right after the runs, as tunehost measures it (the band's RAM figure)
(cd /tmp && timeout 25 $PY -m tunehost snapshot $O/snapshot > $O/snapshot.out 2>&1); echo "snapshot rc=$? $(el)s" | tee -a $O/log.txt
cp $O/snapshot/samples/measure.json $O/measure.json 2>/dev/null; cp $O/snapshot/manifest.json $O/snapshot-manifest.json 2>/dev/null
rm -rf $O/snapshot
echo "done at $(el)s" | tee -a $O/log.txt
$PY - <<PYEOF
import json, glob
for f in sorted(glob.glob("$O/[dq]*.json")):
    try:
        for r in json.load(open(f)):
            print(f.split("/")[-1], r["n_gpu_layers"], r.get("n_cpu_moe"), r["n_gen"], round(r["avg_ts"], 2),
                  round(r["stddev_ts"], 2), r["n_threads"], r["model_size"])
    except Exception as e:
        print(f.split("/")[-1], "unreadable:", str(e)[:80])
PYEOF
