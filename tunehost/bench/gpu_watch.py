"""Watching the GPU while llama-bench runs: clocks, clocks-event (throttle) reasons, power against the limit,
temperature, PCIe generation and width, utilisation — the things that are invisible at rest and matter under load.

:class:`GpuSampler` reads about once a second in a thread (NVML when it loads, else amdgpu sysfs through the host
layer), so llama-bench is not slowed; :func:`judge_gpu` (pure) turns the samples into a :class:`GpuWatch`:
- GPU throttling under load (NVIDIA HW slowdown / HW or SW thermal slowdown / HW power brake, or the temperature at the
  slowdown mark) marks the run disturbed;
- a PCIe link below its maximum generation or width *under load*, and running at the power limit, are findings
  reported with the evidence (they hold for both sides of a comparison, so they do not void its verdict).
amdgpu exposes no clocks-event reasons in sysfs (they sit in the binary gpu_metrics table): on AMD only the
temperature against the hwmon critical mark, power, clocks and the PCIe DPM level are watched.
Intel (xe and i915) has no utilisation counter in sysfs but does name its throttle reasons
(xe `tileN/gtN/freq0/throttle/reason_*`, i915 `gt/gtN/throttle_reason_*`): a sample counts as under load while the GT
is awake (actual frequency above 0: out of RC6), thermal/PROCHOT/RATL/VR reasons disturb the run and PL1/PL2/PL4 are
the power-limit finding.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tunehost.parsers.nvidia_smi import IDLE_PSTATE, IN_USE_PCT, LOW_PSTATE

if TYPE_CHECKING:
    from tunehost.host import Host

INTERVAL_S = 1.0
LOADED_PCT = 50          # a sample counts as "under load" from this GPU utilisation (a desktop at P8 reaches 34 %)
MAX_SAMPLES = 3600       # an hour at 1 Hz; older samples are dropped
THROTTLE_REASONS = {"hw_slowdown": "HW slowdown", "hw_thermal_slowdown": "HW thermal slowdown",
                    "sw_thermal_slowdown": "SW thermal slowdown", "hw_power_brake_slowdown": "HW power brake",
                    "intel_thermal": "thermal limit", "intel_prochot": "PROCHOT", "intel_ratl": "RATL thermal limit",
                    "intel_vr_thermalert": "VR thermal alert", "intel_vr_tdc": "VR current limit"}
# Intel's throttle reason files -> the reason names above; PL1/PL2/PL4 are a power cap, like NVIDIA's sw_power_cap
INTEL_REASONS = {"thermal": "intel_thermal", "prochot": "intel_prochot", "ratl": "intel_ratl",
                 "vr_thermalert": "intel_vr_thermalert", "vr_tdc": "intel_vr_tdc", "pl1": "sw_power_cap",
                 "pl2": "sw_power_cap", "pl4": "sw_power_cap"}


@dataclass(frozen=True)
class GpuSample:
    gpu: str
    at_s: float = 0.0
    utilization_pct: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    clock_reasons: tuple[str, ...] | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    slowdown_c: float | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    awake: bool | None = None   # Intel: the GT was out of RC6 (no utilisation counter to read)
    pstate: int | None = None   # NVIDIA performance state (0 fastest .. 15), None: not reported

    @property
    def loaded(self) -> bool:
        if self.utilization_pct is None:
            return bool(self.awake)
        return self.utilization_pct >= LOADED_PCT


def sample_from_row(row: Mapping[str, Any], at_s: float = 0.0) -> GpuSample | None:
    """A GpuSample from NvmlSession.read()'s or the amdgpu reader's dict; None for garbage."""
    if not isinstance(row, Mapping) or not isinstance(row.get("gpu"), str):
        return None

    def num(key: str) -> float | None:
        v = row.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v >= 0 else None

    def whole(key: str) -> int | None:
        v = num(key)
        return int(v) if v is not None and v < 1e7 else None

    reasons = row.get("clock_reasons")
    return GpuSample(row["gpu"][:80], at_s, num("utilization_pct"), whole("sm_clock_mhz"), whole("mem_clock_mhz"),
                     tuple(str(r) for r in reasons) if isinstance(reasons, list) else None,
                     num("power_w"), num("power_limit_w"), _temp(num("temperature_c")), _temp(num("slowdown_c")),
                     whole("pcie_gen"), whole("pcie_gen_max"), whole("pcie_width"), whole("pcie_width_max"),
                     row["awake"] if isinstance(row.get("awake"), bool) else None, pstate=_pstate(row.get("pstate")))


def _pstate(value: Any) -> int | None:
    """"P3" (NVML row, nvidia-smi) or 3 -> 3; None for anything else (P0..P15 only)."""
    if isinstance(value, str) and re.fullmatch(r"P\d{1,2}", value):
        value = int(value[1:])
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 15 else None


def _temp(value: float | None) -> float | None:
    return value if value is not None and 0 < value < 150 else None   # 0 °C is a vGPU placeholder


def sample_from_gpu(g: Any, at_s: float = 0.0) -> GpuSample:
    """A GpuSample from a GpuInfo (an nvidia-smi dump or NVML snapshot): the same judgement on recorded data."""
    link = g.pcie
    return GpuSample(g.label, at_s, g.utilization_pct, None, None, g.clock_reasons, g.power_draw_w, g.power_limit_w,
                     _temp(g.temperature_c), _temp(g.temperature_slowdown_c),
                     link.gen_current if link else None, link.gen_max if link else None,
                     link.width_current if link else None, link.width_max if link else None,
                     pstate=_pstate(g.pstate))


@dataclass(frozen=True)
class GpuWatch:
    """What the GPUs did during the counted rounds."""

    samples: int
    loaded_samples: int
    reasons: tuple[str, ...] = ()     # disturbances: the run's numbers are not trustworthy
    findings: tuple[str, ...] = ()    # host problems seen under load (both sides of a comparison share them)
    summary: Mapping[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "loaded_samples": self.loaded_samples, "reasons": list(self.reasons),
                "findings": list(self.findings), "summary": dict(self.summary), "unknown": list(self.unknown)}

    @classmethod
    def from_json(cls, data: Any) -> "GpuWatch | None":
        if not isinstance(data, Mapping):
            return None
        return cls(int(data.get("samples") or 0), int(data.get("loaded_samples") or 0),
                   tuple(str(r) for r in data.get("reasons") or ()), tuple(str(f) for f in data.get("findings") or ()),
                   dict(data.get("summary") or {}), tuple(str(u) for u in data.get("unknown") or ()))


def judge_gpu(samples: Sequence[GpuSample]) -> GpuWatch:
    """Throttling under load -> reasons; PCIe below max under load and power capping -> findings. Pure."""
    reasons: list[str] = []
    findings: list[str] = []
    unknown: list[str] = []
    summary: dict[str, Any] = {}
    by_gpu: dict[str, list[GpuSample]] = {}
    for s in samples:
        by_gpu.setdefault(s.gpu, []).append(s)
    loaded_total = 0
    for gpu, rows in by_gpu.items():
        loaded = [s for s in rows if s.loaded]
        loaded_total += len(loaded)
        summary[gpu] = _summary(rows, loaded)
        stuck = _low_pstate(gpu, rows, summary[gpu])
        if stuck:
            findings.append(stuck)
        if not loaded:
            unknown.append(f"{gpu}: never busy during the run (utilisation below {LOADED_PCT} %): "
                           "throttling and the PCIe link under load were not seen")
            continue
        throttled = [s for s in loaded if any(r in THROTTLE_REASONS for r in s.clock_reasons or ())]
        hot = [s for s in loaded if s.temperature_c is not None and s.slowdown_c is not None
               and s.temperature_c >= s.slowdown_c]
        slowed = sum(1 for s in loaded if s in throttled or s in hot)
        if throttled or hot:
            names = sorted({THROTTLE_REASONS[r] for s in throttled for r in s.clock_reasons or ()
                            if r in THROTTLE_REASONS} | ({"at the slowdown temperature"} if hot else set()))
            peak = max((s.temperature_c for s in loaded if s.temperature_c is not None), default=None)
            reasons.append(f"{gpu} throttled under load: {', '.join(names)} in {slowed} of "
                           f"{len(loaded)} busy samples" + (f" (up to {peak:.0f} °C)" if peak is not None else ""))
        gen_seen = max((s.pcie_gen for s in loaded if s.pcie_gen is not None), default=None)
        gen_max = max((s.pcie_gen_max for s in loaded if s.pcie_gen_max is not None), default=None)
        width_seen = max((s.pcie_width for s in loaded if s.pcie_width is not None), default=None)
        width_max = max((s.pcie_width_max for s in loaded if s.pcie_width_max is not None), default=None)
        if gen_seen is not None and gen_max is not None and gen_seen < gen_max:
            findings.append(f"{gpu}: PCIe link stayed at Gen{gen_seen} of Gen{gen_max} under load "
                            f"({len(loaded)} busy samples): check the slot's BIOS speed setting, the riser, the seating")
        if width_seen is not None and width_max is not None and width_seen < width_max:
            findings.append(f"{gpu}: PCIe link x{width_seen} of x{width_max} under load: the card sits in a "
                            "narrower slot or shares its lanes")
        capped = [s for s in loaded if "sw_power_cap" in (s.clock_reasons or ())]
        if capped:
            draw = max((s.power_w for s in capped if s.power_w is not None), default=None)
            limit = next((s.power_limit_w for s in capped if s.power_limit_w is not None), None)
            findings.append(f"{gpu}: at its power limit in {len(capped)} of {len(loaded)} busy samples"
                            + (f" ({draw:g} W of {limit:g} W)" if draw is not None and limit is not None else ""))
    if not samples:
        unknown.append("GPU (no NVML, amdgpu or Intel sysfs readings)")
    return GpuWatch(len(samples), loaded_total, tuple(reasons), tuple(findings), summary, tuple(unknown))


def _low_pstate(gpu: str, rows: Sequence[GpuSample], summary: dict[str, Any]) -> str | None:
    """NVIDIA only: the best (lowest) P-state while the GPU was in use (utilisation >= IN_USE_PCT, which partial
    offload rarely exceeds by much) and below the idle states, and the clock-event reasons then, into the summary; a
    finding when the card never left P3-P4 (llama.cpp#17880: an RTX 3060 held in P3 during partial offload)."""
    active = [s for s in rows if s.pstate is not None and s.pstate < IDLE_PSTATE and s.utilization_pct is not None
              and s.utilization_pct >= IN_USE_PCT]
    if not active:
        return None
    best = min(s.pstate for s in active if s.pstate is not None)
    reasons = sorted({r for s in active for r in s.clock_reasons or ()})
    summary["pstate_in_use"] = [f"P{best}", f"P{max(s.pstate for s in active if s.pstate is not None)}"]
    summary["clock_reasons_in_use"] = reasons
    if best < LOW_PSTATE:
        return None
    mem = [s.mem_clock_mhz for s in active if s.mem_clock_mhz is not None]
    util = [s.utilization_pct for s in active if s.utilization_pct is not None]
    return (f"{gpu}: never left P{best} or a lower-power state while in use ({len(active)} samples at "
            f"{min(util):.0f}-{max(util):.0f} % utilisation" + (f", memory clock up to {max(mem)} MHz" if mem else "")
            + (f", clock-event reasons {', '.join(reasons)}" if reasons else "") + "): the driver keeps the card in "
            "a low performance state when the GPU is partly idle (partial offload); P0/P2 would run its memory at "
            "full clock — check `nvidia-smi -q -d PERFORMANCE` during a run, persistence mode (`sudo nvidia-smi -pm "
            "1`), or offload more layers")


def _summary(rows: Sequence[GpuSample], loaded: Sequence[GpuSample]) -> dict[str, Any]:
    use = loaded or rows

    def span(attr: str) -> list[float] | None:
        values = [getattr(s, attr) for s in use if getattr(s, attr) is not None]
        return [min(values), max(values)] if values else None

    return {"busy_samples": len(loaded), "samples": len(rows), "sm_clock_mhz": span("sm_clock_mhz"),
            "mem_clock_mhz": span("mem_clock_mhz"), "power_w": span("power_w"), "temperature_c": span("temperature_c"),
            "pcie_gen": span("pcie_gen"), "pcie_width": span("pcie_width"), "utilization_pct": span("utilization_pct"),
            "power_limit_w": next((s.power_limit_w for s in use if s.power_limit_w is not None), None)}


# ---------------------------------------------------------------- reading the live GPUs


def amdgpu_cards(host: "Host") -> list[str]:
    """The discrete amdgpu cards' device directories (those with DPM clock tables)."""
    cards = []
    for card in host.files.listdir("/sys/class/drm"):
        dev = f"/sys/class/drm/{card}/device"
        if re.fullmatch(r"card\d+", card) and host.files.read_value(f"{dev}/vendor") == "0x1002" \
                and host.files.exists(f"{dev}/pp_dpm_sclk") and host.files.exists(f"{dev}/pp_dpm_pcie"):
            cards.append(dev)
    return cards


def amdgpu_label(dev: str) -> str:
    """"AMD GPU card0": the name a card's samples and its energy counter are joined by."""
    return f"AMD GPU {dev.split('/')[4]}"


def read_amdgpu(host: "Host", dev: str) -> dict[str, Any]:
    """One amdgpu reading from sysfs: busy %, current sclk/mclk, power and cap (hwmon, µW), edge and junction
    temperature against the junction's critical mark, and the current/max PCIe DPM level."""
    from tunehost.facts.gpu import parse_pp_dpm_pcie

    row: dict[str, Any] = {"gpu": amdgpu_label(dev),
                           "utilization_pct": host.files.read_int(f"{dev}/gpu_busy_percent"),
                           "sm_clock_mhz": _current_mhz(host.files.read(f"{dev}/pp_dpm_sclk")),
                           "mem_clock_mhz": _current_mhz(host.files.read(f"{dev}/pp_dpm_mclk"))}
    for hwmon in host.files.listdir(f"{dev}/hwmon"):
        base = f"{dev}/hwmon/{hwmon}"
        power = host.files.read_int(f"{base}/power1_average") or host.files.read_int(f"{base}/power1_input")
        cap = host.files.read_int(f"{base}/power1_cap")
        junction = host.files.read_int(f"{base}/temp2_input")
        row.update({"power_w": power / 1e6 if power else None, "power_limit_w": cap / 1e6 if cap else None,
                    "temperature_c": (junction or host.files.read_int(f"{base}/temp1_input") or 0) / 1000 or None,
                    "slowdown_c": (host.files.read_int(f"{base}/temp2_crit") or 0) / 1000 or None})
        break
    levels = parse_pp_dpm_pcie(host.files.read(f"{dev}/pp_dpm_pcie"))
    current = next((lv for lv in levels if lv[2]), None)
    if current is not None:
        row.update({"pcie_gen": current[0], "pcie_width": current[1],
                    "pcie_gen_max": max((lv[0] for lv in levels if lv[0]), default=None),
                    "pcie_width_max": max((lv[1] for lv in levels if lv[1]), default=None)})
    return row


def intel_gts(host: "Host") -> list[tuple[str, str, str]]:
    """(label, driver, directory) of every Intel GT with frequency files: xe `device/tileN/gtN/freq0`, i915
    `cardN/gt/gtN`."""
    found = []
    for card in host.files.listdir("/sys/class/drm"):
        dev = f"/sys/class/drm/{card}/device"
        if not re.fullmatch(r"card\d+", card) or host.files.read_value(f"{dev}/vendor") != "0x8086":
            continue
        for tile in (t for t in host.files.listdir(dev) if re.fullmatch(r"tile\d+", t)):
            for gt in (g for g in host.files.listdir(f"{dev}/{tile}") if re.fullmatch(r"gt\d+", g)):
                base = f"{dev}/{tile}/{gt}/freq0"
                if host.files.exists(f"{base}/act_freq"):
                    found.append((f"Intel GPU {card} {tile}/{gt}", "xe", base))
        for gt in (g for g in host.files.listdir(f"/sys/class/drm/{card}/gt") if re.fullmatch(r"gt\d+", g)):
            base = f"/sys/class/drm/{card}/gt/{gt}"
            if host.files.exists(f"{base}/rps_act_freq_mhz"):
                found.append((f"Intel GPU {card} {gt}", "i915", base))
    return found


def read_intel(host: "Host", label: str, driver: str, base: str) -> dict[str, Any]:
    """One Intel GT reading: actual frequency (0 = in RC6, idle) and the throttle reasons asserted now."""
    if driver == "xe":
        act, reason_file = host.files.read_int(f"{base}/act_freq"), f"{base}/throttle/reason_{{}}"
        status = host.files.read_int(f"{base}/throttle/status")
    else:
        act, reason_file = host.files.read_int(f"{base}/rps_act_freq_mhz"), f"{base}/throttle_reason_{{}}"
        status = host.files.read_int(f"{base}/throttle_reason_status")
    reasons = None
    if status in (0, 1):
        reasons = sorted({name for key, name in INTEL_REASONS.items()
                          if host.files.read_int(reason_file.format(key)) == 1}) if status else []
    return {"gpu": label, "sm_clock_mhz": act, "clock_reasons": reasons,
            "awake": act > 0 if isinstance(act, int) and act >= 0 else None}


def _current_mhz(text: str | None) -> int | None:
    for line in (text or "").splitlines():
        match = re.match(r"\s*\d+:\s*(\d+)\s*Mhz\s*\*", line, re.IGNORECASE)
        if match:
            return int(match.group(1))
    return None


class GpuSampler:
    """Samples every GPU about once a second in a daemon thread: ``start()``, ``stop() -> GpuWatch``.

    ``read`` returns one dict per GPU (tests inject recorded rows); by default NVML when it loads, else amdgpu
    sysfs, else Intel xe/i915 sysfs; with none, no thread starts and the report says the GPU was not watched."""

    def __init__(self, host: "Host", *, read: Callable[[], list[dict[str, Any]]] | None = None,
                 interval_s: float = INTERVAL_S, energy: Callable[[], dict[str, float | None]] | None = None):
        self.host = host
        self.interval_s = interval_s
        self._read = read
        self._close: Callable[[], None] | None = None
        self._energy = energy  # the source's energy counters (NVML, amdgpu hwmon); tests inject them
        self._samples: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _source(self) -> Callable[[], list[dict[str, Any]]] | None:
        if self._read is not None:
            return self._read
        from tunehost.host.nvml import NvmlSession

        session = NvmlSession.open() if self.host.live else None
        if session is not None:
            self._close = session.close
            self._energy = session.energy_j
            return session.read
        cards = amdgpu_cards(self.host) if self.host.live else []
        if cards:
            from tunehost.bench.energy import read_amdgpu_energy

            self._energy = lambda: {amdgpu_label(dev): read_amdgpu_energy(self.host, dev) for dev in cards}
            return lambda: [read_amdgpu(self.host, dev) for dev in cards]
        gts = intel_gts(self.host) if self.host.live else []
        if gts:
            self._energy = lambda: {gt[0]: None for gt in gts}  # no energy counter, no power in sysfs
            return lambda: [read_intel(self.host, *gt) for gt in gts]
        return None

    def energy_counters(self) -> dict[str, float | None] | None:
        """Each watched GPU's energy counter in joules (None: that GPU has none); None when no GPU is watched
        (tunehost.bench.energy.EnergyMeter's ``gpu_counters``). Tests inject ``energy``."""
        return None if self._energy is None else self._energy()

    def power_samples(self) -> dict[str, list[tuple[float, float]]]:
        """Each GPU's (time, watts) samples so far: what a GPU without an energy counter is integrated from."""
        out: dict[str, list[tuple[float, float]]] = {}
        for s in list(self._samples):
            if s.power_w is not None:
                out.setdefault(s.gpu, []).append((s.at_s, s.power_w))
        return out

    def start(self) -> None:
        read = self._source()
        if read is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(read,), name="tunehost-gpu-watch", daemon=True)
        self._thread.start()

    def _loop(self, read: Callable[[], list[dict[str, Any]]]) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                rows = read()
            except Exception:  # a broken reading is a gap in the samples, never a failed benchmark
                rows = []
            for row in rows:
                sample = sample_from_row(row, now)
                if sample is not None:
                    self._samples.append(sample)
            del self._samples[:-MAX_SAMPLES]
            self._stop.wait(self.interval_s)

    def window(self, since_s: float) -> GpuWatch:
        """The samples taken since ``since_s`` (time.monotonic), judged: one round's GPU report."""
        return judge_gpu([s for s in list(self._samples) if s.at_s >= since_s])

    def stop(self) -> GpuWatch:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._close is not None:
            self._close()
        return judge_gpu(list(self._samples))
