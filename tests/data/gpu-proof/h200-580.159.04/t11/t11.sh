#!/bin/bash
# Second H200 call (session 11): H25, a CPU-only thread sweep on real-shape GGUFs, tunehost's probe before and after.
# The GGUFs travel as their headers (.head: metadata and tensor table; the data region is zeros) and are grown back to
# their size with truncate; llama-bench is this checkout's portable CPU build. Output: $OUT/t11.tar.gz.
#   run(command="bash .gpu-run/t11.sh", timeout_s=240)
export PYTHONUNBUFFERED=1
R=$PWD; D=$R/.gpu-run/t11; O=/tmp/t11; mkdir -p $O /tmp/s; T0=$(date +%s)
finish() { cd /tmp && tar czf $OUT/t11.tar.gz t11; }
trap finish EXIT
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( 200 - $(el) )); }
for n in qwen3.5-35b-a3b qwen3-30b-a3b llama-3.1-8b; do
  cp $D/$n.head /tmp/s/$n.gguf && truncate -s $(cat $D/$n.size) /tmp/s/$n.gguf
done
ls -ls /tmp/s > $O/shapes.txt; nproc > $O/nproc.txt; lscpu > $O/lscpu.txt 2>&1; free -m > $O/free.txt
(python3 -m venv /tmp/v && /tmp/v/bin/pip install -q --no-index $D/numpy-*.whl) > $O/venv.log 2>&1
probe() {
  PYTHONPATH=$R timeout 20 /tmp/v/bin/python -c "
import json; from tunehost.probes.bandwidth import measure_read_bandwidth as m
b = m(1258291200, repeats=4); print(json.dumps({'gbps': round(b.gbps, 2), 'samples': [round(s, 2) for s in b.samples], 'threads': b.threads}))
" > $O/probe-$1.json 2>&1; echo "probe $1 rc=$? $(el)s $(cat $O/probe-$1.json)" >> $O/log.txt
}
bench() {  # name, seconds at most, then llama-bench's arguments
  name=$1; lim=$2; shift 2
  l=$(( $(left) - 15 )); [ $l -lt 10 ] && { echo "$name skipped: $l s left" >> $O/log.txt; return; }
  [ $lim -gt $l ] && lim=$l
  timeout -k 3 $lim $D/llama-bench "$@" -p 0 -o json > $O/$name.json 2> $O/$name.err
  echo "$name rc=$? $(el)s" >> $O/log.txt
}
probe A
bench q35t 60 -m /tmp/s/qwen3.5-35b-a3b.gguf -t 1,2,4,8,16 -n 16 -r 2
bench q30t 50 -m /tmp/s/qwen3-30b-a3b.gguf -t 1,2,4,8,16 -n 16 -r 2
bench d8t 50 -m /tmp/s/llama-3.1-8b.gguf -t 2,4,8,16 -n 16 -r 2
probe B
echo "done at $(el)s" >> $O/log.txt
