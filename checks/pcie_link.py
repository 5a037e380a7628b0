"""pcie-link — each GPU's (and PCI accelerator's) PCIe link: current vs max generation and width."""

from __future__ import annotations

from typing import Iterable

from tunehost.check import Check, Finding, Fix
from tunehost.facts.gpu import GpuFacts, GpuInfo, PcieLink
from tunehost.facts.processes import ProcessFacts, ProcessInfo

RECHECK_NVIDIA = "nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current --format=csv"
WHY = ("With the whole model in VRAM the link matters little for token generation, but partial offload (-ngl below "
       "the layer count), MoE experts kept in RAM (--cpu-moe / -ot exps=CPU) and prompt processing of CPU-held layers "
       "stream weights over it on every token: half the width is half that bandwidth.")


def serving(facts) -> tuple[ProcessInfo, ...]:
    """Inference servers running now (llama-server, ollama, ...): the one moment doctor sees a GPU under load."""
    try:
        return facts.get(ProcessFacts).servers
    except Exception:  # no process facts (HostFacts.of in tests, a broken sample): judge the link alone
        return ()


def recheck_command(gpu_vendor: str, bus_id: str | None) -> str:
    if gpu_vendor == "nvidia":
        return f"{RECHECK_NVIDIA} -l 1   # while llama-bench runs"
    where = f" -s {bus_id[5:] if bus_id and bus_id.startswith('0000:') else bus_id}" if bus_id else ""
    return f"sudo lspci -vv{where} | grep -E 'LnkCap:|LnkSta:'   # while llama-bench runs"


def link_text(link: PcieLink) -> str:
    gen = (f"Gen{link.gen_current if link.gen_current is not None else '?'} of "
           f"Gen{link.gen_max if link.gen_max is not None else '?'}")
    extra = []
    if link.gen_device_max is not None:
        extra.append(f"device max Gen{link.gen_device_max}")
    if link.gen_host_max is not None:
        extra.append(f"host max Gen{link.gen_host_max}")
    if extra:
        gen += f" ({', '.join(extra)})"
    width = f"x{link.width_current if link.width_current is not None else '?'} of " \
            f"x{link.width_max if link.width_max is not None else '?'}"
    raw = ""
    if link.speed_current or link.speed_max:
        raw = f"; sysfs {link.speed_current or '?'} / max {link.speed_max or '?'}"
    return f"{gen}, {width}{raw}"


def link_evidence(label: str, link: PcieLink, gpu: GpuInfo | None = None) -> dict[str, str]:
    ev = {f"{link.source or '?'} [{label}] link": link_text(link)}
    if gpu is not None and gpu.pstate:
        ev[f"{gpu.source} [{label}] performance state"] = gpu.pstate
    if gpu is not None and gpu.clock_reasons:
        ev[f"{gpu.source} [{label}] clocks event reasons"] = ", ".join(gpu.clock_reasons)
    return ev


class PcieLinkCheck(Check):
    id = "pcie-link"
    title = "GPU PCIe link"
    judges = "each GPU's PCIe link: width below max (always), generation below max (only under load), host limits"
    _servers: tuple = ()

    def run(self, facts) -> Iterable[Finding]:
        gpus = facts.get(GpuFacts)
        if not gpus.gpus and not gpus.accelerators:
            yield self.skip("no GPU found" + (f" ({gpus.nvidia_error})" if gpus.nvidia_error else ""))
            return
        discrete = [g for g in gpus.gpus if not g.integrated]
        self._servers = serving(facts)
        for g in gpus.gpus:
            if g.integrated:
                if not discrete:
                    yield self.skip(f"{g.label} is integrated: its link is on-die, nothing to judge",
                                    {g.source: f"device {g.device_id}, unified memory"})
                continue
            if g.pcie is None or (g.pcie.width_current is None and g.pcie.gen_current is None):
                yield self.skip(f"cannot read the PCIe link of {g.label}", {g.source or "?": "no link information"})
                continue
            yield from self._judge(g.label, g.pcie, g.vendor, g.pci_bus_id, g, g.idle)
        for fn in gpus.accelerators:
            label = f"PCI accelerator {fn.vendor}:{fn.device} ({fn.bus_id})"
            yield from self._judge(label, fn.link, "other", fn.bus_id, None, None)

    def _serving_on(self, gpu: GpuInfo | None) -> str | None:
        """"llama-server (pid 812)" when an inference server runs (on this GPU, when its process list says)."""
        servers = self._servers
        if gpu is not None and gpu.processes:
            pids = {p.pid for p in gpu.processes}
            servers = tuple(p for p in servers if p.pid in pids) or servers
        return ", ".join(f"{p.server or p.name} (pid {p.pid})" for p in servers[:2]) or None

    def _judge(self, label: str, link: PcieLink, vendor: str, bus_id: str | None, gpu: GpuInfo | None,
               idle: bool | None) -> Iterable[Finding]:
        ev = link_evidence(label, link, gpu)
        recheck = recheck_command(vendor, bus_id)
        dpm = link.source.endswith("pp_dpm_pcie")  # amdgpu DPM levels also narrow the width at idle
        said = False
        wc, wm = link.width_current, link.width_max
        if wc is not None and wm is not None and wc < wm and not (dpm and idle is not False):
            said = True
            fix = Fix(f"Put the card in a CPU-attached x{wm} slot (usually the top one); check the board manual for "
                      "slots that share lanes with M.2 drives or a second slot (x8/x8 when both are used); reseat "
                      "the card; a riser cable or bifurcation setting can also force a narrow link. Re-check with:",
                      (recheck,))
            if wc <= 4:
                yield self.fail(f"{label} runs at x{wc} of x{wm}: a quarter of the lanes or less", ev, fix=fix,
                                detail=WHY + " At x4 or below, partial offload and MoE offload are starved.")
            else:
                yield self.warn(f"{label} runs at x{wc} of x{wm}: the link is narrowed (not a power-saving state)",
                                ev, fix=fix, detail=WHY)
        host, dev = link.gen_host_max, link.gen_device_max
        if host is not None and dev is not None and host < dev:
            said = True
            yield self.info(f"{label}: the slot/CPU limits the link to Gen{host}; the card can do Gen{dev}",
                            ev, fix=Fix("Host-limited, not a fault of the card: a slot wired to the chipset or an "
                                        "older CPU/board (or a riser) caps the generation. Move the card to a "
                                        f"Gen{dev} CPU slot if the board has one; the BIOS slot speed must be Auto."),
                            detail=WHY)
        gc, gm = link.gen_current, link.gen_max
        server = self._serving_on(gpu) if gpu is not None else None
        if server:
            ev["inference server running"] = server
        if gc is not None and gm is not None and gc < gm:
            said = True
            if idle is False:
                during = f" while {server} was serving" if server else ""
                yield self.warn(f"{label} runs at Gen{gc} of Gen{gm} while busy ({gpu.pstate if gpu else 'load'})"
                                f"{during}: the link does not train to its maximum under load",
                                ev, fix=Fix("Under load the link should train to its max generation: set the slot's "
                                            "PCIe speed to Auto (or Gen" + str(gm) + ") in the BIOS, reseat the card, "
                                            "and replace a riser that is not rated for Gen" + str(gm) + ". Re-check:",
                                            (recheck,)), detail=WHY)
            else:
                state = f"idle ({gpu.pstate})" if idle and gpu and gpu.pstate else "idle" if idle else "at rest"
                note = ("NVIDIA GPUs drop to Gen1 when idle (P8) to save power" if vendor == "nvidia"
                        else "GPUs lower the link speed when idle (ASPM / DPM)")
                width_ok = f"full width x{wc}, " if wc is not None and wc == wm else ""
                running = (f"; {server} is running but the GPU was idle when read: run `tunehost doctor` again "
                           "during a request to judge the link under load") if server else ""
                yield self.info(f"{label}: {width_ok}Gen{gc} of Gen{gm} {state} is power saving - re-check under load"
                                f"{running}", ev,
                                fix=Fix(f"{note}; this is not a fault. Run the re-check while llama-bench runs "
                                        f"and expect Gen{gm}:", (recheck,)))
        if not said:
            loaded = f" under load while {server} was serving" if server and idle is False else ""
            yield self.ok(f"{label}: {link_text(link)}{loaded}", ev)
