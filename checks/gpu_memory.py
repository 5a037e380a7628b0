"""gpu-memory — free VRAM at rest, other processes holding VRAM, a display running on the inference GPU, MIG,
unified-memory APUs."""

from __future__ import annotations

from typing import Iterable

from tunehost.check import Check, Finding, Fix
from tunehost.facts.chassis import machine_of
from tunehost.facts.gpu import FULL_FREE_MIB, GpuFacts, GpuInfo, GpuProcess, free_impact, held_impact
from tunehost.facts.processes import DISPLAY_PROCESSES as DESKTOP_PROCESSES, INFERENCE_PROCESSES

WHY = ("VRAM that other processes hold is VRAM llama.cpp cannot use for layers or KV cache: fewer -ngl layers or a "
       "shorter context, and every layer left on the CPU costs token-generation speed.")


def _mib(v: int | None) -> str:
    if v is None:
        return "?"
    return f"{v / 1024:.1f} GiB" if v >= 10 * 1024 else f"{v} MiB"


def _proc(p: GpuProcess) -> str:
    return f"{p.name or 'pid ' + str(p.pid)} (pid {p.pid}, {p.used_mib if p.used_mib is not None else '?'} MiB)"


def _stop_command(p: GpuProcess, systemd: bool = True) -> str:
    if p.name in ("ollama", "ollama_llama_server") and systemd:
        return "sudo systemctl stop ollama"
    return f"kill {p.pid}   # {p.name or 'process'}" if p.pid is not None else ""


def memory_evidence(g: GpuInfo) -> dict[str, str]:
    ev = {f"{g.source} [{g.label}] memory": f"total {_mib(g.memory_total_mib)}, used {_mib(g.memory_used_mib)}, "
                                           f"free {_mib(g.memory_free_mib)}"}
    if g.processes:
        ev[f"{g.processes_source or g.source} [{g.label}] processes"] = "; ".join(_proc(p) for p in g.processes)
    if g.connectors is not None:
        ev[f"/sys/class/drm [{g.label}] connected"] = ", ".join(g.connectors) or "no monitor connected"
    if g.display_active is not None or g.display_attached is not None:
        ev[f"{g.source} [{g.label}] display"] = (f"attached {_yn(g.display_attached)}, "
                                                 f"active {_yn(g.display_active)}")
    return ev


def _yn(v: bool | None) -> str:
    return "unknown" if v is None else "yes" if v else "no"


class GpuMemoryCheck(Check):
    id = "gpu-memory"
    title = "GPU memory"
    judges = "free VRAM at rest, other processes holding VRAM, a display on the inference GPU, MIG, unified memory"

    def run(self, facts) -> Iterable[Finding]:
        gpus = facts.get(GpuFacts)
        if not gpus.gpus:
            yield self.skip("no GPU found" + (f" ({gpus.nvidia_error})" if gpus.nvidia_error else ""))
            return
        has_igpu = any(g.integrated for g in gpus.gpus)
        has_discrete = any(not g.integrated for g in gpus.gpus)
        for g in gpus.gpus:
            if g.integrated and has_discrete:
                continue  # beside a discrete card the iGPU is no inference target (it may host the display)
            if g.unified_memory:
                yield self._unified(g)
            elif g.memory_total_mib is None:
                reason = gpus.nvidia_error if g.vendor == "nvidia" and gpus.nvidia_error else "no driver data"
                yield self.skip(f"cannot read the memory of {g.label}: {reason}", {g.source or "?": "no memory data"})
            else:
                yield from self._discrete(g, has_igpu, gpus.drm_note, machine_of(facts).systemd_init is not False)

    def _unified(self, g: GpuInfo) -> Finding:
        if g.vendor == "nvidia":  # a DGX Spark's GB10, a Jetson (facts.gpu.NVIDIA_UNIFIED): no framebuffer at all
            return self.info(
                f"{g.label} uses unified memory: the GPU allocates from system RAM (NVML reports no framebuffer), so "
                "the RAM that is free is its VRAM", {f"{g.source or 'NVML'}/memory": "no framebuffer (unified memory)"},
                fix=Fix("Not a GPU without memory: plan with `tunehost advise` (every layer on the GPU) and keep "
                        "other programs' RAM use down while a model is loaded."),
                detail="Token generation is bound by the SoC's memory bandwidth, which CPU and GPU share.")
        ev = {f"{g.source}/mem_info_vram_total": f"{g.memory_total_mib} MiB" if g.memory_total_mib is not None
              else "(absent)",
              f"{g.source}/mem_info_gtt_total": f"{g.gtt_total_mib} MiB" if g.gtt_total_mib is not None
              else "(absent)"}
        usable = (g.memory_total_mib or 0) + (g.gtt_total_mib or 0)
        return self.info(
            f"{g.label} uses unified memory: {_mib(g.memory_total_mib)} BIOS carve-out + {_mib(g.gtt_total_mib)} GTT "
            f"(system RAM), about {_mib(usable)} usable by the GPU", ev,
            fix=Fix("Not a low-VRAM GPU: llama.cpp's Vulkan/ROCm backends allocate from GTT (shared system RAM). "
                    "To let the GPU map more of the RAM, raise the GTT limit with the kernel options "
                    "ttm.pages_limit / amdgpu.gttsize (see the llama.cpp and AMD docs for your kernel)."),
            detail="Token generation on an APU is bound by system RAM bandwidth, which CPU and GPU share.")

    def _discrete(self, g: GpuInfo, has_igpu: bool, drm_note: str | None, systemd: bool = True) -> Iterable[Finding]:
        ev = memory_evidence(g)
        said = False
        if g.mig_enabled:
            said = True
            slices = ", ".join(f"{_mib(m.memory_total_mib)}" for m in g.mig_devices) or "unknown sizes"
            yield self.info(f"{g.label} has MIG enabled: llama.cpp sees only MIG slices ({slices}), never the whole "
                            f"{_mib(g.memory_total_mib)}", ev,
                            fix=Fix("If this GPU is yours alone, disable MIG (no process may use the GPU; a reset "
                                    "follows):", (f"sudo nvidia-smi -i {g.index if g.index is not None else 0} -mig 0",)),
                            detail="One llama.cpp process runs on one MIG instance: a model bigger than a slice "
                                   "must be split or offloaded to the CPU.")
        procs = list(g.processes or ())
        # compute users (another model server, a python job) vs the desktop and its apps (Xorg, chrome C+G)
        others = [p for p in procs if p.name in INFERENCE_PROCESSES or p.type == "C"
                  or (p.type is None and p.name not in DESKTOP_PROCESSES)]
        desktop = [p for p in procs if p not in others]
        if others:
            said = True
            held = sum(p.used_mib or 0 for p in others)
            servers = [p for p in others if p.name in INFERENCE_PROCESSES]
            text = "; ".join(_proc(p) for p in others)
            fix = Fix("Stop what you do not need before running llama.cpp (another model server keeps its model "
                      "resident):", tuple(c for c in (_stop_command(p, systemd) for p in others) if c))
            if held_impact(held, g.memory_total_mib) == "warn" or servers:
                yield self.warn(f"{g.label}: {held} MiB of VRAM held by other processes: {text}", ev, fix=fix,
                                detail=WHY)
            else:
                yield self.info(f"{g.label}: {held} MiB of VRAM held by other processes: {text}", ev, fix=fix,
                                detail=WHY)
        held = sum(p.used_mib or 0 for p in desktop)
        if g.display_active or held_impact(held, g.memory_total_mib):
            said = True
            yield self._desktop(g, desktop, held, has_igpu, ev)
        # whatever else was said, the free VRAM is judged too: one finding never hides another
        unlisted = max(0, (g.memory_used_mib or 0) - sum(p.used_mib or 0 for p in procs))
        impact = free_impact(g.memory_free_mib, g.memory_total_mib)
        if impact == "full":
            yield self._full(g, ev)
        elif impact == "tight" and g.processes is not None and held_impact(unlisted, g.memory_total_mib) == "warn":
            yield self._unlisted(g, unlisted, ev)
        elif not said:
            yield self._rest(g, held, ev, drm_note)

    def _full(self, g: GpuInfo, ev: dict[str, str]) -> Finding:
        """Free VRAM below what llama.cpp needs before its first layer: nothing can be offloaded."""
        busy = g.idle is False
        state = f" while busy ({g.pstate or 'load'}, {g.utilization_pct}% used)" if busy else ""
        summary = (f"{g.label} is full: only {_mib(g.memory_free_mib)} of {_mib(g.memory_total_mib)} free{state}; "
                   f"llama.cpp needs about {FULL_FREE_MIB} MiB for its buffers before it can offload a single layer")
        listing = ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
                   if g.vendor == "nvidia" else "sudo tunehost doctor")
        fix = Fix("Free the VRAM before running llama.cpp: stop what holds it (named in the findings above; nvidia-smi "
                  "in a container lists only that container's processes), then check again:",
                  (listing, "tunehost doctor --check gpu-memory"))
        if busy:  # a job at work may be the one the user runs: costly, not necessarily the host's fault
            return self.warn(summary, ev, fix=fix, detail=WHY)
        return self.fail(summary, ev, fix=fix, detail=WHY)

    def _unlisted(self, g: GpuInfo, unlisted: int, ev: dict[str, str]) -> Finding:
        """Less than half the VRAM free, and most of what is used held by no listed process."""
        state = "at rest" if g.idle else f"while busy ({g.pstate or 'load'}, {g.utilization_pct}% used)" \
            if g.idle is False else "when read"
        held = "no process is listed as holding it" if unlisted == g.memory_used_mib else \
            f"{unlisted} MiB of it is held by no listed process"
        fix = Fix("Find what holds the memory (nvidia-smi lists processes of this container only; run it on the host):",
                  ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",)
                  if g.vendor == "nvidia" else ("sudo tunehost doctor",))
        return self.warn(f"{g.label}: only {_mib(g.memory_free_mib)} of {_mib(g.memory_total_mib)} free {state}, "
                         f"and {held} (another container or user?)", ev, fix=fix, detail=WHY)

    def _desktop(self, g: GpuInfo, desktop: list[GpuProcess], held: int, has_igpu: bool,
                 ev: dict[str, str]) -> Finding:
        """The desktop on the inference GPU, judged by the VRAM it takes (not by the card's size)."""
        names = ", ".join(_proc(p) for p in desktop) or "display active"
        if has_igpu:
            how = ("Move the display to the integrated GPU: plug the monitor into the motherboard's video output, "
                   "set the BIOS primary display to IGD/iGPU (keep the iGPU enabled), reboot; the desktop then "
                   "renders on the iGPU and this card is left to llama.cpp. Verify with:")
            cmds = ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
                    if g.vendor == "nvidia" else "sudo tunehost doctor",)
        else:
            how = ("This host has no integrated GPU to move the display to: run the inference box headless "
                   "(boot to the text target, use it over SSH), or drive the monitor from a second small GPU. "
                   "Headless frees what the desktop holds:")
            cmds = ("sudo systemctl set-default multi-user.target", "sudo reboot")
        fix = Fix(how, cmds)
        where = f" (monitor on {', '.join(g.connectors)})" if g.connectors else ""
        if g.processes is None:
            return self.info(f"{g.label} also drives the display{where}; how much VRAM the desktop holds is unknown "
                             "(no per-process list)", ev, fix=fix, detail=WHY)
        share = f" ({held / g.memory_total_mib:.0%})" if g.memory_total_mib else ""
        summary = (f"{g.label} also drives the display{where}: the desktop holds {held} MiB{share} of its "
                   f"{_mib(g.memory_total_mib)} ({names})")
        if held_impact(held, g.memory_total_mib) == "warn":
            return self.warn(summary, ev, fix=fix, detail=WHY)
        return self.info(summary, ev, fix=fix, detail=WHY)

    def _rest(self, g: GpuInfo, held: int, ev: dict[str, str], drm_note: str | None) -> Finding:
        free, total = g.memory_free_mib, g.memory_total_mib
        if g.processes is None:
            why = ("the driver lists no processes" if g.vendor == "nvidia" else
                   "no DRM fdinfo memory lines were readable" + (f" ({drm_note})" if drm_note else
                                                                 " (kernel before 5.19 for amdgpu / 6.4 for i915?)"))
            if free_impact(free, total) == "tight":
                return self.warn(f"{g.label}: only {_mib(free)} of {_mib(total)} free, and which processes hold it "
                                 f"is unknown: {why}", ev,
                                 fix=Fix("Find what holds the memory (per-process GPU memory of other users needs "
                                         "root):", ("sudo tunehost doctor",)), detail=WHY)
            return self.ok(f"{g.label}: {_mib(free)} of {_mib(total)} free; which processes hold VRAM is "
                           f"unknown: {why}", ev)
        rest = f"the desktop holds only {held} MiB" if held else "nothing else holds VRAM"
        return self.ok(f"{g.label}: {_mib(free)} of {_mib(total)} free, {rest}", ev)
