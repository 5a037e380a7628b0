"""headless — a graphical session (display server, compositor, display manager) holding RAM/VRAM on an inference box."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.facts.chassis import machine_of
from tunehost.facts.gpu import held_impact
from tunehost.facts.llama import gpu_views
from tunehost.facts.processes import DISPLAY_PROCESSES, ProcessFacts

GO_HEADLESS = ("sudo systemctl set-default multi-user.target", "sudo systemctl isolate multi-user.target")
BACK = "sudo systemctl set-default graphical.target && sudo systemctl isolate graphical.target"


class HeadlessCheck(Check):
    id = "headless"
    title = "Headless"
    judges = "a graphical session holding RAM/VRAM on an inference box"

    def run(self, facts):
        procs = facts.get(ProcessFacts)
        target = procs.default_target
        if procs.processes is None and target is None:
            yield self.skip(f"cannot tell: {procs.processes_reason}; {procs.default_target_reason}")
            return
        ev: dict[str, object] = dict(procs.evidence)
        systemd = machine_of(facts).systemd_init
        if systemd is False:  # `systemctl get-default` reads a link; without systemd as PID 1 no target applies
            ev["PID 1"] = "not systemd: boot targets do not apply"
            target = None
        if target is None and systemd is not False:
            ev["systemctl get-default"] = procs.default_target_reason
        if procs.processes is None:
            yield self.info(f"default target is {target}; whether a display server runs is unknown "
                            f"({procs.processes_reason})", ev)
            return
        displays = procs.display_processes
        if not displays:
            ev["processes sample"] = "no display server, compositor or display manager"
            where = f" (default target {target})" if target else ""
            yield self.ok(f"no graphical session is running{where}", ev)
            return
        ram = sum(p.rss_bytes or 0 for p in displays)
        names = ", ".join(dict.fromkeys(p.name for p in displays))
        for p in displays:
            ev[f"processes sample: pid {p.pid} {p.name}"] = (f"RSS {p.rss_bytes / 2**20:.0f} MiB"
                                                             if p.rss_bytes is not None else "RSS unknown")
        vram, gpu_note, display_gpus, impact = _display_vram(facts, {p.pid for p in displays})
        for key, (mib, _) in vram.items():
            ev[key] = f"{mib:.0f} MiB VRAM"
        if gpu_note:
            ev["GPU facts"] = gpu_note
        fix = Fix(f"Boot to the text console (multi-user.target) on an inference box; to go back: {BACK}",
                  GO_HEADLESS if target != "multi-user.target" else ("sudo systemctl isolate multi-user.target",))
        if systemd is False:
            fix = Fix("Stop the graphical session (its display manager or the compositor's start script) on an "
                      "inference box; systemd is not PID 1 here, so systemctl targets do not apply.")
        held = f"{ram / 2**30:.1f} GiB RAM" if ram >= 2**30 else f"{ram / 2**20:.0f} MiB RAM"
        if vram:
            mib = sum(n for n, _ in vram.values())
            shares = [f"{n / total:.0%} of {name}" if n >= total / 100 else f"under 1% of {name}"
                      for (name, total), n in _per_gpu(vram).items() if total]
            text = (f"the graphical session ({names}) holds {mib:.0f} MiB of VRAM on the inference GPU"
                    + (f" ({', '.join(shares)})" if shares else "") + f" and {held}")
            why = ("VRAM the compositor holds is VRAM llama.cpp cannot use for layers or KV cache, and the display "
                   "competes for the GPU while tokens are generated.")
            if impact == "warn":  # judged by its share of the card (gpu-memory's thresholds), not its presence
                yield self.warn(text, ev, fix=fix, detail=why)
            else:
                yield self.info(text + ": little next to the card's size", ev, fix=fix, detail=why)
            return
        if display_gpus:
            ev["GPU display active"] = ", ".join(display_gpus)
            yield self.warn(f"the graphical session ({names}) drives the inference GPU ({', '.join(display_gpus)}) "
                            f"and holds {held}", ev, fix=fix,
                            detail="The display's framebuffers and compositor live in that GPU's VRAM, which "
                                   "llama.cpp then cannot use.")
            return
        why = f" (default target {target})" if target else ""
        yield self.info(f"a graphical session is running{why}: {names} hold {held}", ev, fix=fix,
                        detail="Fine on a desktop that is also used as one; on a dedicated inference box the memory "
                               "(and any VRAM) is better left to llama.cpp.")


def _display_vram(facts, display_pids: set[int]
                  ) -> tuple[dict[str, tuple[float, tuple[str, float | None]]], str | None, list[str], str | None]:
    """({"GPU <name>: pid N Xorg": (412.0, (GPU name, its total MiB))}, why GPUs are unknown, discrete GPUs driving
    a display, the worst impact on one GPU: "warn" | "info" | None, by facts.gpu.held_impact)."""
    gpus, why = gpu_views(facts)
    if gpus is None:
        return {}, why, [], None
    held: dict[str, tuple[float, tuple[str, float | None]]] = {}
    impacts = set()
    for gpu in gpus:
        on_gpu = 0.0
        for pid, name, mib in gpu.processes:
            base = name.rsplit("/", 1)[-1]
            if (pid in display_pids or base in DISPLAY_PROCESSES) and mib:
                held[f"GPU {gpu.name or '?'}: pid {pid} {base}"] = (mib, (gpu.name or "?", gpu.memory_total_mib))
                on_gpu += mib
        impacts.add(held_impact(on_gpu, gpu.memory_total_mib))
    driving = [g.name or g.vendor or "?" for g in gpus if g.display_active and g.integrated is not True]
    return held, None, driving, "warn" if "warn" in impacts else "info" if "info" in impacts else None


def _per_gpu(vram: dict[str, tuple[float, tuple[str, float | None]]]) -> dict[tuple[str, float | None], float]:
    """{(GPU name, its total MiB): MiB the display holds on it}."""
    sums: dict[tuple[str, float | None], float] = {}
    for mib, gpu in vram.values():
        sums[gpu] = sums.get(gpu, 0.0) + mib
    return sums
