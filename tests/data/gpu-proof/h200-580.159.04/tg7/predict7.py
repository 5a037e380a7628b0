"""Bands for the planned H200 rows of session 7 (written before the run), on the constants of main at the time.

python predict7.py SHAPES_DIR RAM_GBPS: every row's band from tunehost's own bench path (placement_from_flags ->
tg_ceiling_for), the RAM part at RAM_GBPS measured on the host (the VM has no DIMM table: probe-only)."""
import sys
from tunehost.model import read_model
from tunehost.advise.ceiling import Bandwidths, BandContext, CpuView, placement_from_flags, tg_ceiling_for

SHAPES, RAM = sys.argv[1], float(sys.argv[2])
GPU = 4814.3  # advise's NVML figure on the H200 (tg-8b/advise-8b.json)
CPU = CpuView(16, 1, "amx", "intel")
for name, flags in (("llama-3.1-8b", "-ngl 99"), ("llama-3.1-8b", "-ngl 24"), ("llama-3.1-8b", "-ngl 16"),
                    ("llama-3.1-8b", "-ngl 8"), ("gpt-oss-20b", "-ngl 99"), ("gpt-oss-20b", "-ngl 99 -ncmoe 8"),
                    ("gpt-oss-20b", "-ngl 99 -ncmoe 16"), ("gpt-oss-20b", "-ngl 99 -ncmoe 24")):
    m = read_model(f"{SHAPES}/{name}.gguf")
    p = placement_from_flags(m, flags.split(), gpu=True)
    bw = Bandwidths(gpu_gbps=GPU, gpu_basis="NVML", ram_gbps=RAM, gpu_hbm="nvidia")
    ctx = BandContext(cpu=CPU if p.path in ("moe", "split") else None, quant=None, ram_measured=True)
    c = tg_ceiling_for(m, p, bw, ctx)
    b = c.band
    print(f"{name:14} {flags:20} {p.path:6} ceiling {c.tokens_per_s:8.1f}"
          f"  band {b.low:7.1f} - {b.high:7.1f}  {b.model} ({b.bound})")
