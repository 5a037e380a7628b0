"""thermals — CPU and GPU temperatures, NVIDIA clocks-event (throttle) reasons, CPU thermal_throttle counters."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from tunehost.check import Check, Finding, Fix
from tunehost.facts.chassis import VM_FIRMWARE, MachineFacts, machine_of
from tunehost.facts.gpu import GpuFacts, GpuInfo
from tunehost.facts.thermal import TempReading, ThermalFacts, throttle_evidence
from tunehost.parsers.nvidia_smi import IN_USE_PCT, LOW_PSTATE

AMD_TJMAX_C = 95.0        # Ryzen desktop/mobile Tjmax (3700X/7000-series 95 C; some parts 90, laptops up to 105)
CPU_HOT_C = 80.0          # sustained inference at or above this is close to throttling
GPU_HOT_C = 85.0
GPU_HOT_IDLE_C = 70.0     # an idle GPU this hot has a cooling problem
JUNCTION_MARGIN_C = 5.0   # amdgpu junction within this of its hwmon crit: the firmware is pulling clocks
# reasons that mean the clocks are held down by heat or power delivery (not by idleness or a set limit)
THROTTLE_REASONS = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
    "sw_thermal_slowdown": "SW thermal slowdown",
}
RECHECK_COUNTERS = "grep -H . /sys/devices/system/cpu/cpu*/thermal_throttle/*_throttle_count"
RECHECK_NVIDIA = ("nvidia-smi --query-gpu=temperature.gpu,clocks_event_reasons.active,power.draw,power.limit "
                  "--format=csv -l 1   # while llama-bench runs")
COOLING = ("Improve cooling: clean the heatsink and fans, check the cooler's mounting and fan curve (BIOS), and "
           "the case airflow; on a laptop use a cooling pad and the performance fan mode.")
WHY = ("When the CPU or GPU reaches its thermal limit the clocks drop, and long llama.cpp runs slow down minutes "
       "after a short benchmark looked fine.")


def _c(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f} °C"


def _ev(readings: Iterable[TempReading]) -> dict[str, str]:
    out = {}
    for r in readings:
        key = f"{r.source} ({r.chip} {r.label})" if r.source != "sensors" else f"sensors ({r.chip} {r.label})"
        out[key] = r.raw if r.source == "sensors" else f"{r.raw} ({_c(r.value_c)})"
    return out


def plausible_c(value: float | None) -> float | None:
    """A GPU temperature that can be real; 0 °C (vGPU guests), negative or absurd readings are placeholders."""
    return value if value is not None and 0 < value < 150 else None


def cpu_reading(cpu: tuple[TempReading, ...]) -> TempReading | None:
    """The reading that says how hot the CPU is: the hottest package (coretemp), Tdie or else Tctl (k10temp)."""
    if not cpu:
        return None
    by = lambda *labels: [r for r in cpu if r.label in labels and r.value_c is not None]  # noqa: E731
    packages = [r for r in cpu if r.label.startswith("Package id") and r.value_c is not None]
    for group in (packages, by("Tdie"), by("Tctl")):
        if group:
            return max(group, key=lambda r: r.value_c or 0)
    valued = [r for r in cpu if r.value_c is not None]
    return max(valued, key=lambda r: r.value_c or 0) if valued else None


RECHECK_PSTATE = "nvidia-smi --query-gpu=pstate,utilization.gpu,clocks.mem --format=csv -l 1"


def low_pstate_in_use(g: GpuInfo) -> str | None:
    """"<gpu> is in use (39 %) but in P3 ..." when an NVIDIA GPU doing work sits in P3 or a lower-power state."""
    level = g.pstate_level if g.vendor == "nvidia" else None
    util = g.utilization_pct
    if level is None or level < LOW_PSTATE or util is None or util < IN_USE_PCT or g.idle:
        return None
    power = f", {g.power_draw_w:g} W of {g.power_limit_w:g} W" if g.power_draw_w and g.power_limit_w else ""
    return (f"{g.label} is in use ({util} %{power}) but in {g.pstate}: a low performance state whose memory clock "
            "is below P0/P2's; partial offload (the GPU idles between CPU-held layers) keeps cards there "
            "(llama.cpp#17880) — one moment only: `tunehost bench` watches the state for a whole run")


class ThermalsCheck(Check):
    id = "thermals"
    title = "Thermals"
    judges = "CPU and GPU temperatures, NVIDIA clocks-event (throttle) reasons, CPU thermal-throttle counters"

    def run(self, facts) -> Iterable[Finding]:
        thermal = facts.get(ThermalFacts)
        yield from self._cpu(thermal, machine_of(facts))
        counts = throttle_evidence(thermal.throttle)
        if counts:
            cpus = sorted({int(k.split("/cpu")[-1].split("/")[0]) for k in counts})
            yield self.info(f"CPU thermal throttling happened since boot on {len(cpus)} CPU(s) "
                            "(counters alone cannot say when)", counts,
                            fix=Fix("Read the counters twice while llama-bench runs: if they grow, the CPU is "
                                    "throttling now. " + COOLING, (RECHECK_COUNTERS,)), detail=WHY)
        try:
            gpus = facts.get(GpuFacts)
        except LookupError:
            return
        for g in gpus.gpus:
            yield from self._gpu(g)

    def _cpu(self, thermal: ThermalFacts, machine: MachineFacts) -> Iterable[Finding]:
        main = cpu_reading(thermal.cpu)
        if main is None or main.value_c is None:
            bogus = ""
            if thermal.bogus:
                b = thermal.bogus[0]
                bogus = (f"; the ACPI zone {b.chip} {b.label} ({_c(b.value_c)}, crit {_c(b.crit_c)}) is a bogus "
                         "firmware zone, not the CPU")
            kind = machine.kind
            if len(machine.layers) > 1:  # a container in a VM: neither the container nor the guest has a sensor
                yield self.skip(f"no CPU temperature in this {machine.label}{bogus}: the sensors are the physical "
                                "host's, under the hypervisor (load k10temp or coretemp on that host: neither this "
                                "container nor the virtual machine around it sees a CPU sensor)", _ev(thermal.bogus))
                return
            if kind == "virtual machine":
                yield self.skip(f"no CPU temperature: {VM_FIRMWARE} (a guest sees no CPU sensor; the host's cooling "
                                f"and firmware set the clocks){bogus}", _ev(thermal.bogus))
                return
            if kind == "container":
                yield self.skip(f"no CPU temperature in this container{bogus}: the sensors are the host's (load "
                                "k10temp or coretemp there, not here)", _ev(thermal.bogus))
                return
            why = thermal.note or "no coretemp/k10temp sensor (driver not loaded, or too old a kernel for this CPU)"
            yield self.skip(f"no CPU temperature: {why}{bogus}; try: sudo modprobe k10temp (AMD) or "
                            "sudo modprobe coretemp (Intel)", _ev(thermal.bogus))
            return
        ev = _ev([main] + [r for r in thermal.cpu if r is not main and r.label.startswith(("Tccd", "Tctl", "Tdie"))])
        crit = main.crit_c if main.crit_c is not None else (AMD_TJMAX_C if main.chip in ("k10temp", "zenpower")
                                                              else None)
        high = main.high_c if main.high_c is not None and (crit is None or main.high_c < crit) else CPU_HOT_C
        value = main.value_c
        where = f"{main.chip} {main.label}"
        if crit is not None and value >= crit - 2:
            yield self.fail(f"CPU at its thermal limit: {where} {_c(value)} (limit {_c(crit)}): it is throttling",
                            ev, fix=Fix(COOLING + " Re-check under load:", ("watch -n1 sensors",)), detail=WHY)
        elif value >= high:
            yield self.warn(f"CPU is hot: {where} {_c(value)} (hot at {_c(high)}, limit {_c(crit)}): sustained "
                            "inference will likely reach the throttling point", ev,
                            fix=Fix(COOLING + " Re-check under load:", ("watch -n1 sensors",)), detail=WHY)
        else:
            yield self.ok(f"CPU {where} {_c(value)}", ev)

    def _gpu(self, g: GpuInfo) -> Iterable[Finding]:
        raw_temp = g.temperature_c
        temp = plausible_c(raw_temp)
        placeholder = g.temperature_c is not None and temp is None
        reasons = g.clock_reasons or ()
        if temp is None and g.clock_reasons is None and not placeholder:
            return
        if placeholder:
            g = replace(g, temperature_c=None)
        if plausible_c(g.temperature_slowdown_c) is None and g.temperature_slowdown_c is not None:
            g = replace(g, temperature_slowdown_c=None)
        key = f"{g.source} [{g.label}]"
        ev: dict[str, str] = {}
        if temp is not None:
            ev[f"{key} temperature"] = _c(temp) + (f" (slowdown at {_c(g.temperature_slowdown_c)})"
                                                   if g.temperature_slowdown_c is not None else "")
        if g.hotspot_c is not None:
            ev[f"{key} junction"] = _c(g.hotspot_c) + (f" (limit {_c(g.hotspot_crit_c)})" if g.hotspot_crit_c else "")
        if g.clock_reasons is not None:
            ev[f"{key} clocks event reasons"] = ", ".join(reasons) or "none active"
        if g.pstate:
            ev[f"{key} performance state"] = g.pstate
        if g.power_draw_w is not None or g.power_limit_w is not None:
            ev[f"{key} power"] = (f"{g.power_draw_w} W of {g.power_limit_w} W limit"
                                  + (f" (default {g.power_default_limit_w} W)" if g.power_default_limit_w else ""))
        recheck = (RECHECK_NVIDIA,) if g.vendor == "nvidia" else ("watch -n1 sensors",)
        throttled = [THROTTLE_REASONS[r] for r in reasons if r in THROTTLE_REASONS]
        slowdown = g.temperature_slowdown_c
        idle = g.idle
        if throttled:
            yield self.fail(f"{g.label} is throttling: {', '.join(throttled)} active", ev,
                            fix=Fix(COOLING + " HW power brake points at the PSU/power cables. Watch it under load:",
                                    recheck), detail=WHY)
            return
        hot_crit = g.hotspot_crit_c
        if g.hotspot_c is not None and hot_crit is not None and g.hotspot_c >= hot_crit - JUNCTION_MARGIN_C:
            # amdgpu: the junction at its critical mark (gpu_metrics' TEMP_HOTSPOT bit is no evidence: see docs)
            yield self.fail(f"{g.label}: junction {_c(g.hotspot_c)} at its limit {_c(hot_crit)}: it is throttling",
                            ev, fix=Fix(COOLING, recheck), detail=WHY)
            return
        if temp is not None and slowdown is not None and temp >= slowdown:
            yield self.fail(f"{g.label} at {_c(temp)}: at its slowdown temperature {_c(slowdown)}", ev,
                            fix=Fix(COOLING, recheck), detail=WHY)
            return
        if temp is not None and (temp >= GPU_HOT_C or (slowdown is not None and temp >= slowdown - 10)):
            yield self.warn(f"{g.label} is hot: {_c(temp)}", ev, fix=Fix(COOLING, recheck), detail=WHY)
            return
        if temp is not None and idle and temp >= GPU_HOT_IDLE_C:
            yield self.warn(f"{g.label} is hot at idle: {_c(temp)}", ev,
                            fix=Fix("An idle GPU should sit well below 70 °C: check that its fans spin. " + COOLING,
                                    recheck), detail=WHY)
            return
        lowered = (g.power_limit_w is not None and g.power_default_limit_w
                   and g.power_limit_w < 0.9 * g.power_default_limit_w)
        if lowered:
            yield self.info(f"{g.label}: power limit lowered to {g.power_limit_w:g} W (default "
                            f"{g.power_default_limit_w:g} W); {_c(temp)}", ev,
                            fix=Fix("A lowered limit trades prompt-processing speed for heat and noise; token "
                                    "generation is mostly memory-bound and loses less. Restore the default with:",
                                    (f"sudo nvidia-smi -i {g.index if g.index is not None else 0} "
                                     f"-pl {g.power_default_limit_w:g}",)))
            return
        if "sw_power_cap" in reasons and idle is False:
            yield self.info(f"{g.label} is at its power limit ({g.power_draw_w} W of {g.power_limit_w} W) under load;"
                            f" {_c(temp)}", ev)
            return
        low = low_pstate_in_use(g)
        if low:
            yield self.info(low, ev, fix=Fix("Watch the state during a real request; if it stays at P3 or below, "
                                             "offload more layers (a GPU that idles between CPU-held layers is not "
                                             "boosted), and keep persistence mode on:", (RECHECK_PSTATE,
                                                                                       "sudo nvidia-smi -pm 1")))
            return
        if temp is None:
            why = (f"the driver reports {raw_temp:g} °C, a placeholder (vGPU guest, "
                   "passthrough without sensors)" if placeholder else "the driver gives none")
            ev[f"{key} temperature"] = f"{_c(raw_temp)} (placeholder)" if placeholder else "not reported"
            yield self.skip(f"{g.label}: no temperature reading: {why}", ev)
            return
        yield self.ok(f"{g.label} {_c(temp)}" + (f", {g.pstate}" if g.pstate else ""), ev)
