#!/bin/bash
# second H100 call (a fresh machine): CUDA build for sm_90 without FA kernels as tg-8b/run4.sh, then real-shape TG:
# Llama 3.1 8B Q4_K and Qwen3-30B-A3B Q4_K all on the GPU, Qwen3-30B-A3B with every expert in RAM (-ncmoe 99), 8B on the CPU.
# run as: run(command="bash .gpu-run/run5.sh", carry=[".gpu-proof"], timeout_s=380) after scripts/gpu_proof --pack;
# every figure it printed is in the files beside it (tests/gpu/test_gpu_proof_h100.py)
export PYTHONUNBUFFERED=1
R=$PWD; S=/tmp/src; B=/tmp/b; O=/tmp/o; mkdir -p $S /tmp/site /tmp/shapes $O
finish() { cd /tmp && tar czf $OUT/run5.tar.gz o; }
trap finish EXIT
t0=$(date +%s)
nproc > $O/nproc.txt; lscpu > $O/lscpu.txt 2>&1; free -m > $O/free.txt
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-proof/wheels/*.whl > $O/pip.log 2>&1
python3 -m pip install -q --no-index --find-links .gpu-proof/wheels --no-deps --target /tmp/site . >> $O/pip.log 2>&1
echo "pip rc=$? $(( $(date +%s) - t0 ))s"
tar xzf .gpu-proof/llama_cpp_python-0.3.36.tar.gz -C $S
L=$S/llama_cpp_python-0.3.36/vendor/llama.cpp
timeout 215 bash -c "cmake -S $L -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF > $O/cfg.log 2>&1 && cmake --build $B -j 16 --target llama-bench llama-fit-params > /tmp/build.log 2>&1"
echo "build rc=$? $(( $(date +%s) - t0 ))s"; tail -c 3000 /tmp/build.log > $O/build-tail.log
BIN=$B/bin
cd /tmp
for m in llama-3.1-8b qwen3-30b-a3b; do
  PYTHONPATH=/tmp/site:$R timeout 60 python3 $R/scripts/llama_memory_check.py --only $m --write-models /tmp/shapes --quant Q4_K --bin-dir $BIN >> $O/shape.log 2>&1
  echo "shape $m rc=$? $(( $(date +%s) - t0 ))s"
done
ls -la /tmp/shapes >> $O/shape.log
M8=$(ls /tmp/shapes/*lama*8*.gguf | head -1); MQ=$(ls /tmp/shapes/*wen3*30*.gguf | head -1)
nvidia-smi --query-gpu=timestamp,pstate,power.draw,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
run() { name=$1; shift; timeout 45 $BIN/llama-bench "$@" -p 0 -o json > $O/$name.json 2> $O/$name.err; echo "$name rc=$? $(( $(date +%s) - t0 ))s"; }
run b8-gpu -m $M8 -ngl 99 -n 128 -r 3
run bq-gpu -m $MQ -ngl 99 -n 128 -r 3
run bq-split -m $MQ -ngl 99 -ncmoe 99 -n 64 -r 2
run b8-cpu -m $M8 -ngl 0 -n 32 -r 2
kill $SMI
for m in $M8 $MQ; do PYTHONPATH=/tmp/site:$R timeout 40 python3 -m tunehost advise --model $m --format json --no-probe > $O/advise-$(basename $m .gguf).json 2>> $O/advise.err; echo "advise rc=$?"; done
PYTHONPATH=/tmp/site:$R timeout 40 python3 -m tunehost snapshot $O/snapshot > $O/snapshot.out 2>&1; echo "snapshot rc=$?"
python3 - <<PYEOF
import json, glob
for f in sorted(glob.glob("$O/b*.json")):
    try:
        for r in json.load(open(f)): print(f.split("/")[-1], r["n_gen"], round(r["avg_ts"],2), round(r["stddev_ts"],2), r["n_threads"], r.get("n_cpu_moe"), r["model_size"])
    except Exception as e: print(f, e)
PYEOF
