#!/bin/bash
# H200 call (session 5), after scripts/gpu_proof in the same call, on its CUDA build: real-shape TG for H9-H11
# (tests/advise/data/round3_hypotheses.md): Qwen3-30B-A3B swept over -ncmoe 0..48, hybrids and other shapes on the GPU,
# two more splits. Run as:
#   run(command="T0=$(date +%s); scripts/gpu_proof; T0=$T0 bash .gpu-run/run6.sh", carry=[".gpu-proof"], timeout_s=600)
# Every step is bounded; none starts after 575 s from T0; whatever ran is in $OUT/run6.tar.gz.
export PYTHONUNBUFFERED=1
R=$PWD; O=/tmp/o6; mkdir -p $O /tmp/shapes
T0=${T0:-$(date +%s)}
W=/tmp/gpu-proof-work
PY=$W/venv/bin/python; [ -x $PY ] || PY=python3
BIN=$W/cache/llama.cpp/0.3.36-cuda/bin
finish() { cd /tmp && tar czf $OUT/run6.tar.gz o6; }
trap finish EXIT
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( 575 - $(el) )); }
echo "run6 start at $(el)s; bin: $(ls $BIN 2>&1 | tr '\n' ' ')" | tee $O/log.txt
[ -x $BIN/llama-bench ] || { echo "no llama-bench: gpu_proof's build is missing" | tee -a $O/log.txt; exit 1; }
nproc > $O/nproc.txt; free -m > $O/free.txt
for m in qwen3-30b-a3b qwen3.5-35b-a3b qwen3-coder-next nemotron-nano-9b-v2 lfm2-1.2b gemma-3-27b gpt-oss-20b glm-4.5-air; do
  (cd /tmp && PYTHONPATH=$R timeout 30 $PY $R/scripts/llama_memory_check.py --only $m --write-models /tmp/shapes --quant Q4_K --bin-dir $BIN) >> $O/shape.log 2>&1
  echo "shape $m rc=$? $(el)s" | tee -a $O/log.txt
done
ls -la /tmp/shapes >> $O/shape.log
nvidia-smi --query-gpu=timestamp,pstate,power.draw,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
# name, seconds at most, then llama-bench's arguments
bench() {
  name=$1; lim=$2; shift 2
  l=$(left); [ $l -lt 15 ] && { echo "$name skipped: $l s left" | tee -a $O/log.txt; return; }
  [ $lim -gt $l ] && lim=$l
  timeout -k 3 $lim $BIN/llama-bench "$@" -p 0 -o json > $O/$name.json 2> $O/$name.err
  echo "$name rc=$? $(el)s" | tee -a $O/log.txt
}
S=/tmp/shapes
bench sq3 75 -m $S/qwen3-30b-a3b.gguf -ngl 99 -ncmoe 0,12,24,36,48 -t 16 -n 64 -r 2
# the RAM bandwidth right after the sweep, as tunehost measures it (the measured path's figure)
if [ $(left) -ge 30 ]; then (cd /tmp && timeout 25 $PY -m tunehost snapshot $O/snapshot > $O/snapshot.out 2>&1); echo "snapshot rc=$? $(el)s" | tee -a $O/log.txt; fi
bench gq35 40 -m $S/qwen3.5-35b-a3b.gguf -ngl 99 -n 128 -r 3
bench glfm 30 -m $S/lfm2-1.2b.gguf -ngl 99 -n 128 -r 3
bench gnem 40 -m $S/nemotron-nano-9b-v2.gguf -ngl 99 -n 128 -r 3
bench sq35 40 -m $S/qwen3.5-35b-a3b.gguf -ngl 99 -ncmoe 40 -t 16 -n 64 -r 2
bench gqcn 60 -m $S/qwen3-coder-next.gguf -ngl 99 -n 128 -r 3
bench ggem 40 -m $S/gemma-3-27b.gguf -ngl 99 -n 64 -r 3
bench goss 40 -m $S/gpt-oss-20b.gguf -ngl 99 -n 128 -r 3
bench gglm 70 -m $S/glm-4.5-air.gguf -ngl 99 -n 64 -r 2
bench sglm 60 -m $S/glm-4.5-air.gguf -ngl 99 -ncmoe 46 -t 16 -n 32 -r 2
kill $SMI 2>/dev/null
echo "done at $(el)s" | tee -a $O/log.txt
$PY - <<PYEOF
import json, glob
for f in sorted(glob.glob("$O/[gs]*.json")):
    try:
        for r in json.load(open(f)):
            print(f.split("/")[-1], r["n_gen"], round(r["avg_ts"], 2), round(r["stddev_ts"], 2), r["n_threads"],
                  r.get("n_cpu_moe"), r["model_size"])
    except Exception as e:
        print(f.split("/")[-1], "unreadable:", str(e)[:80])
PYEOF
