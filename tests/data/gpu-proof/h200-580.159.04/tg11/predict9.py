"""Bands for the planned H200 rows of session 11 (H24), on the constants of 3742582, computed before the call's
output was read.

python predict9.py SHAPES_DIR RAM_GBPS: every row's band from tunehost's own bench path (placement_from_flags ->
tg_ceiling_for), the RAM part at RAM_GBPS measured on the host (the VM has no DIMM table: probe-only)."""
import sys
from tunehost.model import read_model
from tunehost.advise.ceiling import Bandwidths, BandContext, CpuView, placement_from_flags, tg_ceiling_for

SHAPES, RAM = sys.argv[1], float(sys.argv[2])
GPU = 4814.3  # advise's NVML figure on the H200 (this call's gpu-proof advise.json)
CPU = CpuView(16, 1, "amx", "intel")
for name, flags in (("qwen3.5-35b-a3b", "-ngl 99 -ncmoe 0"), ("qwen3.5-35b-a3b", "-ngl 99 -ncmoe 10"),
                    ("qwen3.5-35b-a3b", "-ngl 99 -ncmoe 20"), ("qwen3.5-35b-a3b", "-ngl 99 -ncmoe 40"),
                    ("qwen3.5-35b-a3b", "-ngl 0"), ("llama-3.1-8b", "-ngl 0")):
    m = read_model(f"{SHAPES}/{name}.gguf")
    p = placement_from_flags(m, flags.split(), gpu=True)
    bw = Bandwidths(gpu_gbps=GPU, gpu_basis="NVML", ram_gbps=RAM, gpu_hbm="nvidia")
    ctx = BandContext(cpu=CPU if p.path in ("cpu", "moe", "split") else None, quant=None, ram_measured=True)
    c = tg_ceiling_for(m, p, bw, ctx)
    b = c.band
    print(f"{name:16} {flags:18} {p.path:6} ceiling {c.tokens_per_s:8.1f}"
          f"  band {b.low:7.1f} - {b.high:7.1f}  {b.model} ({b.bound})  parts {[(w, round(g, 3)) for w, g, _ in c.parts]}")
