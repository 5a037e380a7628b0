"""apu-memory — how much RAM an AMD APU's GPU may use (Strix Halo, Ryzen APUs): GTT and the TTM limit behind it,
the BIOS UMA carve-out, the boot options that set them, and what the loaded model uses of it.

An APU's GPU reaches RAM two ways: the BIOS UMA carve-out (`mem_info_vram_total`, taken from the OS at boot) and GTT
(`mem_info_gtt_total`), which the kernel's TTM caps at half of RAM unless `ttm.pages_limit` says more. ROCm/HIP
allocates from that pool, so a model larger than it fails to load with ROCm (out of memory, or the OOM killer)
while Vulkan may still run it (lemonade-sdk/llamacpp-rocm#57, ggml-org/llama.cpp#19818, #24626; antirez/ds4#475:
"15860M of GTT memory ready" on a 128 GB Strix Halo, ROCm out of memory at an 80 GiB model).
"""

from __future__ import annotations

from typing import Iterable

from tunehost.check import Check, Finding, Fix
from tunehost.facts.apu_memory import IGNORED_OPTIONS, PAGES_PER_GIB, ApuMemory, read_apu_memory
from tunehost.facts.drm_clients import DrmFacts
from tunehost.facts.gpu import GpuFacts, GpuInfo
from tunehost.facts.memory import SwapFacts

DEFAULT_SHARE = 0.55      # GTT at most this share of RAM: the kernel's default TTM limit (half of RAM) in force
FULL_USED = 0.90          # GTT this full: the loaded model (and its context) is at the GPU's limit
ROCM_SEES_CARVE_OUT = (6, 16, 9)  # ROCm/legacy-rocm-build#5444: before it, HIP sees only ~GTT on Strix Halo
STRIX_HALO = "0x1586"
OS_RESERVE_MIB = 4096     # less RAM than this left outside GTT: the OS and llama.cpp's host buffers get OOM-killed
WHY = ("On an APU the model's weights live in RAM the GPU maps through GTT: ROCm/HIP allocates only from that pool, "
       "so a model larger than it fails with ROCm (out of memory or OOM-killed) while Vulkan may still load it; the "
       "BIOS carve-out is RAM the OS can never use for anything else.")
VERIFY = "cat /sys/class/drm/card*/device/mem_info_gtt_total"


def _gib(mib: float) -> str:
    """"96 GiB", "15.5 GiB" (one decimal unless whole)."""
    gib = round(mib / 1024, 1)
    return f"{gib:.0f} GiB" if gib == int(gib) else f"{gib:.1f} GiB"


def target_gib(installed_mib: int) -> int:
    """The GTT size to suggest: all of RAM but max(8 GiB, an eighth) for the OS and llama.cpp's host buffers."""
    installed = installed_mib / 1024
    return max(1, int(installed - max(8.0, installed / 8)))


def raise_fix(installed_mib: int, carve_out_mib: int | None) -> Fix:
    gib = target_gib(installed_mib)
    pages = gib * PAGES_PER_GIB
    args = f"ttm.pages_limit={pages} ttm.page_pool_size={pages}"
    uma = (f" With the TTM route set the BIOS UMA frame buffer to its minimum (512 MB): the {_gib(carve_out_mib)} "
           "carve-out is then RAM again, for the OS and the GPU alike." if carve_out_mib and carve_out_mib > 1024
           else "")
    return Fix(
        f"Raise the TTM limit on the kernel command line to {gib} GiB ({pages} pages of 4 KiB = GiB x 262144), "
        "and set only ttm.* (amdgpu.gttsize is deprecated and fights it). Fedora/RHEL: the grubby line below; "
        f"Debian/Ubuntu: add `{args}` to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then `sudo update-grub`; "
        "reboot, and after it verify with the last line. Undo: `sudo grubby --update-kernel=ALL "
        "--remove-args=\"ttm.pages_limit ttm.page_pool_size\"` (or delete the words from /etc/default/grub and run "
        f"`sudo update-grub`), then reboot.{uma}",
        (f'sudo grubby --update-kernel=ALL --args="{args}"', "sudo systemctl reboot", VERIFY))


class ApuMemoryCheck(Check):
    id = "apu-memory"
    title = "APU GPU memory (GTT, TTM limit, UMA)"
    judges = "an AMD APU's GPU share of RAM: GTT and the TTM limit, the BIOS UMA carve-out, their boot options"

    def run(self, facts) -> Iterable[Finding]:
        gpus = facts.get(GpuFacts)
        if facts.host is None:
            yield self.skip("no host to read the TTM limit from")
            return
        mem = read_apu_memory(facts.host, gpus, facts.get(SwapFacts).mem)  # the one /proc/meminfo read
        if not mem.gpus:
            yield self.skip("no AMD APU (integrated Radeon) found: the GPU's memory is its own VRAM")
            return
        yield from self._options(mem)
        discrete = gpus.discrete
        for g in mem.gpus:
            if discrete:  # a desktop Ryzen's 2-CU iGPU beside an RTX card: nobody runs the model on it
                yield self.skip(f"{g.label} sits beside the discrete {discrete[0].label}: inference runs there, the "
                                "integrated GPU's share of RAM is not judged", mem.evidence)
                continue
            yield self._judge(g, mem, _holders(facts, g))

    def _options(self, mem: ApuMemory) -> Iterable[Finding]:
        ev = dict(mem.evidence)
        for wrong, right in IGNORED_OPTIONS.items():
            if wrong in mem.cmdline:
                yield self.warn(f"{wrong}={mem.cmdline[wrong]} on the kernel command line is not a kernel option "
                                f"(the kernel ignores it): the name is {right}", ev,
                                fix=Fix(f"Replace {wrong} with {right} (for the GTT size prefer ttm.pages_limit and "
                                        "ttm.page_pool_size, in 4 KiB pages) in the boot loader configuration, then "
                                        "reboot."), detail=WHY)
        if "amdgpu.gttsize" in mem.cmdline and "ttm.pages_limit" in mem.cmdline:
            yield self.warn("both amdgpu.gttsize and ttm.pages_limit are on the kernel command line: amdgpu.gttsize "
                            "is deprecated (amdgpu says so in dmesg) and the two set the same limit", ev,
                            fix=Fix("Keep ttm.pages_limit (and ttm.page_pool_size) and remove amdgpu.gttsize from the "
                                    "boot loader configuration, then reboot."), detail=WHY)
        asked = mem.cmdline.get("ttm.pages_limit")
        if asked and asked.isdigit() and mem.pages_limit is not None and int(asked) != mem.pages_limit:
            yield self.info(f"ttm.pages_limit={asked} is on the kernel command line but the ttm module runs with "
                            f"{mem.pages_limit}: a later setting (/etc/modprobe.d, an initramfs) overrides it", ev)

    def _judge(self, g: GpuInfo, mem: ApuMemory, holders: str) -> Finding:
        ev = dict(mem.evidence)
        if holders:
            ev["GTT held by (/proc/<pid>/fdinfo)"] = holders
        gtt, ram, carve = g.gtt_total_mib, mem.ram_mib, g.memory_total_mib
        if not gtt:
            return self.skip(f"{g.label}: GTT size not reported (no mem_info_gtt_total: not amdgpu, or too old a "
                             "kernel)", ev)
        if not ram:
            return self.skip(f"{g.label}: GTT {_gib(gtt)}, but MemTotal (/proc/meminfo) is not readable: cannot "
                             "judge the share", ev)
        installed = ram + (carve or 0)
        pool = f"{_gib(gtt)} of {_gib(ram)} RAM through GTT" + (f" (+ a {_gib(carve)} BIOS carve-out)" if carve
                                                                 and carve > 1024 else "")
        used = g.gtt_used_mib
        if used is not None and used >= FULL_USED * gtt:
            by = f" ({holders})" if holders else ""
            return self.warn(f"{g.label}: GTT is full — {_gib(used)} of {_gib(gtt)} in use{by}: the loaded model "
                             "and its context are at the GPU's limit; a larger model or context fails with ROCm (out "
                             "of memory or OOM-killed)", ev, fix=raise_fix(installed, carve), detail=WHY)
        if ram - gtt < OS_RESERVE_MIB:
            return self.warn(f"{g.label}: the GPU may map {pool}, leaving {_gib(ram - gtt)} for the OS: a model "
                             "that fills GTT gets llama.cpp or other processes OOM-killed", ev,
                             fix=Fix(f"Lower ttm.pages_limit to {target_gib(installed) * PAGES_PER_GIB} "
                                     f"({target_gib(installed)} GiB) on the kernel command line and reboot."),
                             detail=WHY)
        if gtt <= DEFAULT_SHARE * ram and ram >= 12 * 1024:
            limit = (f"ttm.pages_limit={mem.pages_limit} ({_gib(mem.limit_mib)})" if mem.pages_limit
                     else "the kernel's default TTM limit")
            big_carve = carve is not None and carve >= gtt
            summary = (f"{g.label}: the GPU may use only {pool} ({limit}: half of RAM): models above about "
                       f"{_gib(gtt - 2048)} fail to load with ROCm (out of memory) where Vulkan may still run them")
            if big_carve:
                summary += f"; the {_gib(carve)} carve-out is more than GTT, and ROCm allocates from GTT"
                if g.device_id == STRIX_HALO and mem.kernel is not None and mem.kernel < ROCM_SEES_CARVE_OUT:
                    summary += (f" (kernel {'.'.join(map(str, mem.kernel))}: before 6.16.9 ROCm sees GTT only, "
                                "not the carve-out)")
                return self.warn(summary, ev, fix=raise_fix(installed, carve), detail=WHY)
            return self.info(summary, ev, fix=raise_fix(installed, carve), detail=WHY)
        in_use = f"; {_gib(used)} in use" + (f" ({holders})" if holders else "") if used else ""
        return self.ok(f"{g.label}: the GPU may use {pool}{in_use}", ev)


def _holders(facts, g: GpuInfo) -> str:
    """"llama-server (pid 812) 40 GiB" for the processes holding this APU's GTT (the model the user runs), from
    fdinfo; "" when none is seen (not root, no DRM clients, the facts absent)."""
    try:
        drm = facts.get(DrmFacts)
    except Exception:  # a test without DRM facts, a broken /proc: judge the pool alone
        return ""
    held = sorted((p for p in drm.on(g.pci_bus_id) if p.other_mib), key=lambda p: -(p.other_mib or 0))
    return ", ".join(f"{p.name or '?'} (pid {p.pid}) {_gib(p.other_mib or 0)}" for p in held[:3])
