#!/bin/bash
# H22 (round3_hypotheses.md): a CUDA build of llama-bench without flash-attention kernels (fast), the Llama 3.1 8B
# Q4_K shape, llama-bench tg64 at -d 0,8192,32768 -fa 0. Everything written under $OUT as it goes.
export PYTHONUNBUFFERED=1
R=$PWD; S=/tmp/src; B=/tmp/b; O=$OUT; mkdir -p $S /tmp/site /tmp/shapes
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-proof/wheels/*.whl > $O/pip.log 2>&1
python3 -m pip install -q --no-index --find-links .gpu-proof/wheels --no-deps --target /tmp/site . >> $O/pip.log 2>&1
echo "pip rc=$? $(el)s" | tee -a $O/log.txt
tar xzf .gpu-proof/llama_cpp_python-0.3.36.tar.gz -C $S
L=$S/llama_cpp_python-0.3.36/vendor/llama.cpp
timeout 200 bash -c "cmake -S $L -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF > /tmp/cfg.log 2>&1 && cmake --build $B -j 16 --target llama-bench llama-fit-params > /tmp/build.log 2>&1"
echo "build rc=$? $(el)s" | tee -a $O/log.txt; tail -c 1500 /tmp/build.log > $O/build-tail.log
BIN=$B/bin
[ -x $BIN/llama-bench ] || { echo "no llama-bench" | tee -a $O/log.txt; exit 0; }
cd /tmp
PYTHONPATH=/tmp/site:$R timeout 45 python3 $R/scripts/llama_memory_check.py --only llama-3.1-8b --write-models /tmp/shapes --quant Q4_K --bin-dir $BIN > $O/shape.log 2>&1
echo "shape rc=$? $(el)s" | tee -a $O/log.txt
M=/tmp/shapes/llama-3.1-8b.gguf
nvidia-smi --query-gpu=timestamp,pstate,power.draw,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
timeout 90 $BIN/llama-bench -m $M -ngl 99 -fa 0 -p 0 -n 64 -d 0,8192,32768 -r 3 -o json > $O/depth.json 2> $O/depth.err
echo "bench rc=$? $(el)s" | tee -a $O/log.txt
kill $SMI
python3 -c "
import json
for r in json.load(open('$O/depth.json')): print(r['n_depth'], r['n_gen'], round(r['avg_ts'], 2), round(r['stddev_ts'], 2), r['flash_attn'], r['type_k'])
" | tee -a $O/log.txt
