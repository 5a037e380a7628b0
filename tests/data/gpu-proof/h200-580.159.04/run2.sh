#!/bin/bash
# second H200 call: the captures with the fixed gpu_proof (idle), then the same under a torch load that holds VRAM
export PYTHONUNBUFFERED=1
mkdir -p /tmp/gp/busy
timeout -k 5 150 python3 scripts/gpu_proof --no-build --out /tmp/gp/idle --deadline 140 > /tmp/gp/idle.log 2>&1
echo "idle rc=$?"
PY=/tmp/gpu-proof-work/venv/bin/python
cat > /tmp/gp/load.py <<'PYEOF'
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
hold = torch.empty(8 * 2**30, dtype=torch.bfloat16, device="cuda")  # 16 GiB held, as another program would
t = time.time()
while time.time() - t < 40:
    c = a @ b
    torch.cuda.synchronize()
print("load done", flush=True)
PYEOF
python3 /tmp/gp/load.py > /tmp/gp/busy/load.log 2>&1 &
LOAD=$!
sleep 8
cd /tmp/gp/busy
nvidia-smi -q > nvidia-smi-q.txt 2>&1
nvidia-smi -q -x > nvidia-smi-q-x.xml 2>&1
nvidia-smi --query-gpu=index,name,pstate,power.draw,power.limit,clocks.sm,clocks.mem,utilization.gpu,memory.used,clocks_throttle_reasons.active --format=csv > query.csv 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > apps.csv 2>&1
timeout 60 $PY -m tunehost doctor --json > doctor.json 2> doctor.err; echo "busy doctor rc=$?"
timeout 60 $PY -m tunehost snapshot /tmp/gp/busy/snapshot > snapshot.out 2> snapshot.err; echo "busy snapshot rc=$?"
wait $LOAD
cd /tmp/gp
tar czf $OUT/gpu-proof-2.tar.gz idle idle.log busy
ls -la $OUT
python3 - <<'PYEOF'
import json
for d in ("idle", "busy"):
    try:
        doc = json.load(open(f"/tmp/gp/{d}/doctor.json"))
        print(d, doc["verdict"], [(f["check"], f["severity"]) for f in doc["findings"]])
    except Exception as e:
        print(d, "doctor.json:", e)
PYEOF
cat /tmp/gp/busy/query.csv /tmp/gp/busy/apps.csv
