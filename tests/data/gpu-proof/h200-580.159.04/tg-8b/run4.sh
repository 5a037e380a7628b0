#!/bin/bash
# a real-shape TG measurement on the lent GPU: Llama 3.1 8B Q4_K (sparse weights, real tensor table) with llama-bench,
# beside tunehost advise's band for the same file. Bounded so the whole call stays inside the device budget.
export PYTHONUNBUFFERED=1
R=$PWD; S=/tmp/src; B=/tmp/b; mkdir -p $S /tmp/site /tmp/shapes
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-proof/wheels/*.whl > $OUT/pip.log 2>&1
python3 -m pip install -q --no-index --find-links .gpu-proof/wheels --no-deps --target /tmp/site . >> $OUT/pip.log 2>&1
echo "pip rc=$? $(( $(date +%s) - t0 ))s"
tar xzf .gpu-proof/llama_cpp_python-0.3.36.tar.gz -C $S
L=$S/llama_cpp_python-0.3.36/vendor/llama.cpp
timeout 195 bash -c "cmake -S $L -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF > /tmp/cfg.log 2>&1 && cmake --build $B -j 16 --target llama-bench llama-fit-params > /tmp/build.log 2>&1"
echo "build rc=$? $(( $(date +%s) - t0 ))s"; tail -c 2000 /tmp/cfg.log > $OUT/build-tail.log; tail -c 3000 /tmp/build.log >> $OUT/build-tail.log
BIN=$B/bin
[ -x $BIN/llama-bench ] || { echo "no llama-bench"; exit 0; }
cd /tmp
PYTHONPATH=/tmp/site:$R timeout 60 python3 $R/scripts/llama_memory_check.py --only llama-3.1-8b --write-models /tmp/shapes --quant Q4_K --bin-dir $BIN > $OUT/shape.log 2>&1
echo "shape rc=$? $(( $(date +%s) - t0 ))s"
M=$(ls /tmp/shapes/*.gguf | head -1); ls -la $M
nvidia-smi --query-gpu=timestamp,pstate,power.draw,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv -lms 500 > $OUT/smi-during-bench.csv 2>&1 &
SMI=$!
timeout 60 $BIN/llama-bench -m $M -ngl 99 -p 0 -n 128 -r 5 -o json > $OUT/llama-bench-8b.json 2> $OUT/llama-bench-8b.err
echo "bench rc=$? $(( $(date +%s) - t0 ))s"
kill $SMI
PYTHONPATH=/tmp/site:$R timeout 60 python3 -m tunehost advise --model $M --format json --no-probe > $OUT/advise-8b.json 2> $OUT/advise-8b.err
echo "advise rc=$? $(( $(date +%s) - t0 ))s"
python3 -c "
import json
b=json.load(open('$OUT/llama-bench-8b.json')); print([(r['n_gen'], r['avg_ts'], r['stddev_ts'], r['model_size'], r['backends'] if 'backends' in r else r.get('backend')) for r in b])
a=json.load(open('$OUT/advise-8b.json'))['ceiling']; print(a['tokens_per_s'], a['gpu_gbps'], a['band'] and (a['band']['low_tokens_per_s'], a['band']['high_tokens_per_s']))
"
