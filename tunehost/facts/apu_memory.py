"""The share of RAM an AMD APU's GPU may use: the BIOS UMA carve-out (VRAM), GTT and the TTM limit behind it.

Read through the host (a snapshot replays them): amdgpu's `mem_info_vram_total` / `mem_info_gtt_total` /
`mem_info_gtt_used` (GpuFacts), `/sys/module/ttm/parameters/{pages_limit,page_pool_size}` (4 KiB pages),
`/sys/module/amdgpu/parameters/gttsize` (MiB, -1 = automatic), the memory options on `/proc/cmdline` (`ttm.*`,
`amdgpu.gttsize`, and misspellings the kernel ignores) and MemTotal. Judged in checks/apu_memory.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.bounds import whole_text
from tunehost.printable import one_line
from tunehost.facts.gpu import GpuFacts, GpuInfo
from tunehost.facts.memory import MEMINFO, MemInfo
from tunehost.host.cpuinfo import kernel_release

if TYPE_CHECKING:
    from tunehost.host import Host

TTM = "/sys/module/ttm/parameters"
AMDGPU = "/sys/module/amdgpu/parameters"
CMDLINE = "/proc/cmdline"
PAGE_BYTES = 4096
PAGES_PER_GIB = (1 << 30) // PAGE_BYTES   # 262144: ttm.pages_limit = GiB x 262144
MAX_CMDLINE_CHARS = 4096                   # COMMAND_LINE_SIZE is 2048 on x86; more is not a kernel command line
# the boot options that size the GPU's share of RAM, and names users type that the kernel ignores
GTT_OPTIONS = ("ttm.pages_limit", "ttm.page_pool_size", "amdgpu.gttsize")
IGNORED_OPTIONS = {"amdgpu.gtt_size": "amdgpu.gttsize", "amdttm.pages_limit": "ttm.pages_limit",
                   "ttm.pages_limits": "ttm.pages_limit", "amdgpu.gtt": "amdgpu.gttsize"}
_OPTION = re.compile(r"^([A-Za-z0-9_.-]{1,64})=(-1|[0-9]{1,19})$")  # a count, or -1 (amdgpu: automatic)


def parse_cmdline_options(text: str | None) -> dict[str, str]:
    """The GTT/TTM options of a kernel command line (and the misspelled ones), {name: value}; the last one wins."""
    found: dict[str, str] = {}
    for word in (text or "")[:MAX_CMDLINE_CHARS].split():
        match = _OPTION.match(word)
        if match and (match[1] in GTT_OPTIONS or match[1] in IGNORED_OPTIONS):
            found[match[1]] = match[2]
    return found


@dataclass(frozen=True)
class ApuMemory:
    gpus: tuple[GpuInfo, ...] = ()             # AMD integrated GPUs (APUs)
    ram_mib: int | None = None                 # MemTotal: what the OS got after the BIOS carve-out
    pages_limit: int | None = None             # ttm's limit, in 4 KiB pages (the module's live value)
    page_pool_size: int | None = None
    gttsize_mib: int | None = None             # amdgpu.gttsize (-1: automatic)
    cmdline: Mapping[str, str] = field(default_factory=dict)
    evidence: Mapping[str, str] = field(default_factory=dict)
    kernel: tuple[int, int, int] | None = None  # the running kernel's version, from /proc/sys/kernel/osrelease

    @property
    def limit_mib(self) -> int | None:
        return self.pages_limit * PAGE_BYTES // (1 << 20) if self.pages_limit else None


def read_apu_memory(host: "Host", gpus: GpuFacts, meminfo: MemInfo) -> ApuMemory:
    """The APU memory facts; never raises (unknown is None). MemTotal comes from the one /proc/meminfo read of the
    host's facts (a second read here made a recorded snapshot keep a later MemAvailable than swap had judged)."""
    apus = tuple(g for g in gpus.gpus if g.vendor == "amd" and g.integrated)
    evidence: dict[str, str] = {}
    for g in apus:
        for name, value, note in (("mem_info_vram_total", g.memory_total_mib, " (the BIOS UMA carve-out)"),
                                  ("mem_info_gtt_total", g.gtt_total_mib, ""),
                                  ("mem_info_gtt_used", g.gtt_used_mib, "")):
            if value is not None:
                evidence[f"{g.source}/{name} [{g.label}]"] = f"{value} MiB{note}"
    total_kib = meminfo.kb("MemTotal")
    if total_kib:
        evidence[f"{MEMINFO} MemTotal"] = f"{total_kib} kB"

    def param(path: str, low: int, high: int) -> int | None:
        raw = host.files.read_value(path)
        if raw is None:
            return None
        evidence[path] = one_line(raw, 40)
        return whole_text(raw, low, high)

    limit = param(f"{TTM}/pages_limit", 1, 1 << 40)
    pool = param(f"{TTM}/page_pool_size", 0, 1 << 40)
    gttsize = param(f"{AMDGPU}/gttsize", -1, 1 << 30) if host.files.exists(f"{AMDGPU}/gttsize") else None
    cmdline = parse_cmdline_options(host.files.read(CMDLINE))
    if cmdline:
        evidence[f"{CMDLINE} (memory options)"] = " ".join(f"{k}={v}" for k, v in cmdline.items())
    release = kernel_release(host)
    version = kernel_version(release)
    if release and version:
        evidence["/proc/sys/kernel/osrelease"] = one_line(release, 64)
    return ApuMemory(apus, total_kib // 1024 if total_kib else None, limit, pool, gttsize, cmdline, evidence, version)


def kernel_version(release: str | None) -> tuple[int, int, int] | None:
    """"6.14.0-1014-oem" -> (6, 14, 0); None for anything else."""
    match = re.match(r"(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?", release or "")
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None
