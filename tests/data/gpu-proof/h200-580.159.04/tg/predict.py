"""Bands for planned H200 rows, with the current constants (written before the run)."""
from tunehost.model import read_model
from tunehost.advise.bandwidth import bytes_per_token, cpu_moe_bytes_per_token
from tunehost.advise.calibration import Measurement, judge
GB = 1e9
GPU = 4814.3  # advise's NVML figure on the H200 (tg-8b/advise-8b.json)
RAM = 90.0    # the H200 VM's measured RAM bandwidth, first/advise.json 89.75 (moves 64-93 on these VMs)
rows = []
def add(rid, name, ncmoe=None, tps=1.0):
    m = read_model(f"/tmp/shapes/{name}.gguf")
    total = bytes_per_token(m) / GB
    cpu = cpu_moe_bytes_per_token(m, ncmoe) / GB if ncmoe else 0.0
    kind = "split" if ncmoe else "gpu"
    hw = "NVIDIA H200" + (" + Xeon VM (16 vCPUs)" if ncmoe else "")
    rows.append(Measurement(rid, hw, kind, GPU, name, "Q4_K", m.is_moe, m.block_count, round(total - cpu, 3),
                            round(cpu, 3), RAM if ncmoe else 0.0, tps, "plan", cores=16 if ncmoe else None,
                            ccds=1 if ncmoe else None, isa="amx" if ncmoe else None, hybrid=m.has_recurrent,
                            ram_measured=bool(ncmoe)))
for n in ("llama-3.1-8b", "qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-coder-next", "lfm2-1.2b", "gemma-3-27b",
          "gpt-oss-20b", "nemotron-nano-9b-v2", "glm-4.5-air", "gpt-oss-120b"):
    add("g-" + n, n)
for k in (12, 24, 36, 48):
    add(f"s-qwen3-30b-a3b-{k}", "qwen3-30b-a3b", k)
add("s-qwen3.5-35b-a3b-40", "qwen3.5-35b-a3b", 40)
add("s-glm-4.5-air-46", "glm-4.5-air", 46)
add("s-gpt-oss-120b-36", "gpt-oss-120b", 36)
for v in judge(rows):
    m = v.m
    print(f"{m.id:28} {m.band_class():12} layers {m.layers:3} bytes {m.bytes_gb:6.3f} cpu {m.cpu_bytes_gb:6.3f}  band {v.low:7.1f} - {v.high:7.1f}")
