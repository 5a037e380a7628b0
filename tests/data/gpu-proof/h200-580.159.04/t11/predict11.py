"""H25's bands (session 11): the CPU thread sweep's rows, each at its thread count (CpuView cores = threads), the RAM
part at RAM_GBPS measured on the host (probe-only). python predict11.py SHAPES_DIR RAM_GBPS"""
import sys
from tunehost.model import read_model
from tunehost.advise.ceiling import Bandwidths, BandContext, CpuView, placement_from_flags, tg_ceiling_for

SHAPES, RAM = sys.argv[1], float(sys.argv[2])
for name in ("qwen3.5-35b-a3b", "qwen3-30b-a3b", "llama-3.1-8b"):
    m = read_model(f"{SHAPES}/{name}.gguf")
    p = placement_from_flags(m, ["-ngl", "0"], gpu=False)
    for t in (1, 2, 4, 8, 16):
        bw = Bandwidths(ram_gbps=RAM)
        c = tg_ceiling_for(m, p, bw, BandContext(cpu=CpuView(t, 1, "amx", "intel"), quant=None, ram_measured=True))
        b = c.band
        print(f"{name:16} -t {t:2}  {p.path:4} band {b.low:6.2f} - {b.high:6.2f}  {b.model} ({b.bound})")
