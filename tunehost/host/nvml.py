"""The `nvml` sampler: NVIDIA GPUs read through NVML (pynvml from nvidia-ml-py), stored as samples/nvml.json.

pynvml is imported only when the live sampler runs, never with a snapshot. Every NVML call is guarded: a missing
library, no driver or an NVMLError makes that value null (or the whole sample {"error": ...}), never a crash.

Format (docs/checks.d/gpu-memory.md): {"driver_version": str|null, "cuda_version": "12.8"|null, "error": str|null,
"gpus": [{"index", "name", "uuid", "pci_bus_id", "memory_total_mib", "memory_used_mib", "memory_free_mib",
"compute_capability", "pcie": {"gen_current", "gen_max", "gen_device_max", "width_current", "width_max"},
"temperature_c", "temperature_slowdown_c", "clocks_event_reasons": int|null, "clocks_event_reasons_active": [names],
"power_draw_w", "power_limit_w", "power_default_limit_w", "pstate": "P8", "utilization_pct",
"display_active": bool, "display_mode": bool, "mig_enabled": bool, "mig_devices": [{"index", "memory_total_mib",
"memory_used_mib"}], "processes": [{"pid", "used_mib", "type": "C"|"G"|"C+G"}], "memory_bus_width_bits",
"memory_clock_max_mhz", "bar1_total_mib"}]}.
Process names are not recorded here: they come from the `processes` sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from tunehost.parsers.nvidia_smi import decode_clock_reasons

if TYPE_CHECKING:
    from tunehost.host import Host

MIB = 1024 * 1024


def _call(fn: Callable[..., Any] | None, *args: Any) -> Any:
    """fn(*args), or None when NVML says no (NVMLError, not supported, an old library without that function)."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:
        return None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    value = str(value).strip()
    return value or None


def _mib(value: Any) -> int | None:
    return int(value) // MIB if isinstance(value, int) else None


def _label(index: int) -> str:
    """"NVIDIA GPU 0": the name a GPU's samples and its energy counter are joined by."""
    return f"NVIDIA GPU {index}"


def _pstate_name(value: Any) -> str | None:
    """NVML's performance state 0..15 -> "P0".."P15" (32 is NVML_PSTATE_UNKNOWN)."""
    return f"P{value}" if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 15 else None


def _bool(value: Any) -> bool | None:
    return bool(value) if isinstance(value, int) else None


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def sample_nvml(host: "Host") -> dict[str, Any]:
    """All NVIDIA GPUs as NVML reports them; {"error": ..., "gpus": []} when NVML cannot be used."""
    try:
        import pynvml  # lazy: only the live sampler pays for it, a snapshot never loads it
    except Exception as exc:
        return {"error": f"pynvml (nvidia-ml-py) cannot be imported: {_error_text(exc)}", "gpus": []}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no libnvidia-ml.so (no driver), driver/library mismatch, no GPU
        return {"error": f"NVML init failed: {_error_text(exc)}", "gpus": []}
    try:
        return _read_all(pynvml)
    except Exception as exc:
        return {"error": f"NVML query failed: {_error_text(exc)}", "gpus": []}
    finally:
        _call(getattr(pynvml, "nvmlShutdown", None))


def _read_all(nv: Any) -> dict[str, Any]:
    cuda = _call(getattr(nv, "nvmlSystemGetCudaDriverVersion", None))
    count = _call(nv.nvmlDeviceGetCount)
    gpus = []
    for index in range(count if isinstance(count, int) else 0):
        handle = _call(nv.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            continue
        gpus.append(_read_gpu(nv, index, handle))
    return {
        "error": None if isinstance(count, int) else "nvmlDeviceGetCount failed",
        "driver_version": _str(_call(getattr(nv, "nvmlSystemGetDriverVersion", None))),
        "cuda_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) and cuda > 0 else None,
        "gpus": gpus,
    }


def _read_gpu(nv: Any, index: int, h: Any) -> dict[str, Any]:
    get = lambda name, *args: _call(getattr(nv, name, None), h, *args)  # noqa: E731
    # v2 first: its `used` leaves out what the driver reserves (nvidia-smi's "Used" beside "Reserved"); v1's counts it
    # as used (on the first real H200: 18137 MiB "used" against nvidia-smi's 17523 + 616 reserved)
    version = getattr(nv, "nvmlMemory_v2", None)
    mem = get("nvmlDeviceGetMemoryInfo", version) if version is not None else None
    reserved = getattr(mem, "reserved", None) if mem is not None else None
    if mem is None or not isinstance(reserved, int):
        mem, reserved = get("nvmlDeviceGetMemoryInfo"), None
    pci = get("nvmlDeviceGetPciInfo")
    cc = get("nvmlDeviceGetCudaComputeCapability")
    reasons = get("nvmlDeviceGetCurrentClocksEventReasons")
    if reasons is None:
        reasons = get("nvmlDeviceGetCurrentClocksThrottleReasons")
    pstate = get("nvmlDeviceGetPerformanceState")
    power = get("nvmlDeviceGetPowerUsage")
    limit = get("nvmlDeviceGetEnforcedPowerLimit")
    default_limit = get("nvmlDeviceGetPowerManagementDefaultLimit")
    util = get("nvmlDeviceGetUtilizationRates")
    mig = get("nvmlDeviceGetMigMode")
    mig_enabled = bool(mig[0]) if isinstance(mig, (list, tuple)) and mig and isinstance(mig[0], int) else None
    return {
        "index": index,
        "name": _str(get("nvmlDeviceGetName")),
        "uuid": _str(get("nvmlDeviceGetUUID")),
        "pci_bus_id": _str(getattr(pci, "busId", None)) if pci is not None else None,
        "memory_total_mib": _mib(getattr(mem, "total", None)),
        "memory_used_mib": _mib(getattr(mem, "used", None)),
        "memory_free_mib": _mib(getattr(mem, "free", None)),
        "memory_reserved_mib": _mib(reserved),
        "compute_capability": f"{cc[0]}.{cc[1]}" if isinstance(cc, (list, tuple)) and len(cc) == 2 else None,
        "pcie": {
            "gen_current": get("nvmlDeviceGetCurrPcieLinkGeneration"),
            "gen_max": get("nvmlDeviceGetMaxPcieLinkGeneration"),          # limited by the slot/CPU as well
            "gen_device_max": get("nvmlDeviceGetGpuMaxPcieLinkGeneration"),  # what the card itself can do
            "width_current": get("nvmlDeviceGetCurrPcieLinkWidth"),
            "width_max": get("nvmlDeviceGetMaxPcieLinkWidth"),
        },
        "temperature_c": get("nvmlDeviceGetTemperature", getattr(nv, "NVML_TEMPERATURE_GPU", 0)),
        "temperature_slowdown_c": get("nvmlDeviceGetTemperatureThreshold",
                                      getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)),
        "clocks_event_reasons": reasons if isinstance(reasons, int) else None,
        "clocks_event_reasons_active": list(decode_clock_reasons(reasons)) if isinstance(reasons, int) else None,
        "power_draw_w": round(power / 1000, 2) if isinstance(power, int) else None,
        "power_limit_w": round(limit / 1000, 2) if isinstance(limit, int) else None,
        "power_default_limit_w": round(default_limit / 1000, 2) if isinstance(default_limit, int) else None,
        "pstate": f"P{pstate}" if isinstance(pstate, int) and 0 <= pstate <= 15 else None,
        "utilization_pct": getattr(util, "gpu", None) if util is not None else None,
        "display_active": _bool(get("nvmlDeviceGetDisplayActive")),
        "display_mode": _bool(get("nvmlDeviceGetDisplayMode")),
        "mig_enabled": mig_enabled,
        "mig_devices": _mig_devices(nv, h) if mig_enabled else [],
        "processes": _processes(nv, h),
        "memory_bus_width_bits": get("nvmlDeviceGetMemoryBusWidth"),
        "memory_clock_max_mhz": get("nvmlDeviceGetMaxClockInfo", getattr(nv, "NVML_CLOCK_MEM", 2)),
        "bar1_total_mib": _mib(getattr(get("nvmlDeviceGetBAR1MemoryInfo"), "bar1Total", None)),
    }


def _mig_devices(nv: Any, h: Any) -> list[dict[str, Any]]:
    found = []
    count = _call(getattr(nv, "nvmlDeviceGetMaxMigDeviceCount", None), h)
    for i in range(count if isinstance(count, int) else 0):
        mh = _call(getattr(nv, "nvmlDeviceGetMigDeviceHandleByIndex", None), h, i)
        if mh is None:
            continue
        mem = _call(getattr(nv, "nvmlDeviceGetMemoryInfo", None), mh)
        found.append({"index": i, "memory_total_mib": _mib(getattr(mem, "total", None)),
                      "memory_used_mib": _mib(getattr(mem, "used", None))})
    return found


def _processes(nv: Any, h: Any) -> list[dict[str, Any]] | None:
    """Processes holding memory on this GPU: pid, MiB and C/G/C+G. None when NVML cannot list them."""
    by_pid: dict[int, dict[str, Any]] = {}
    listed = False
    for kind, fn in (("C", "nvmlDeviceGetComputeRunningProcesses"), ("G", "nvmlDeviceGetGraphicsRunningProcesses")):
        procs = _call(getattr(nv, fn, None), h)
        if procs is None:
            continue
        listed = True
        for p in procs:
            pid = getattr(p, "pid", None)
            if not isinstance(pid, int):
                continue
            row = by_pid.setdefault(pid, {"pid": pid, "used_mib": None, "type": kind})
            if row["type"] != kind:
                row["type"] = "C+G"
            used = _mib(getattr(p, "usedGpuMemory", None))
            if used is not None:
                row["used_mib"] = max(row["used_mib"] or 0, used)
    return sorted(by_pid.values(), key=lambda r: r["pid"]) if listed else None


class NvmlSession:
    """A light NVML reader for watching GPUs under load (bench): init once, `read()` each second, `close()`.

    `read()` returns one dict per GPU with only the fast calls (clocks, clocks-event reasons, power, temperature,
    PCIe link, utilisation); every call guarded like the sampler. `open()` returns None when NVML cannot be used."""

    def __init__(self, nv: Any, handles: list[tuple[int, Any]]):
        self._nv = nv
        self._handles = handles

    @classmethod
    def open(cls) -> "NvmlSession | None":
        try:
            import pynvml
        except Exception:
            return None
        try:
            pynvml.nvmlInit()
        except Exception:
            return None
        count = _call(pynvml.nvmlDeviceGetCount)
        handles = [(i, h) for i in range(count if isinstance(count, int) else 0)
                   if (h := _call(pynvml.nvmlDeviceGetHandleByIndex, i)) is not None]
        if not handles:
            _call(getattr(pynvml, "nvmlShutdown", None))
            return None
        return cls(pynvml, handles)

    def read(self) -> list[dict[str, Any]]:
        nv = self._nv
        rows = []
        for index, h in self._handles:
            get = lambda name, *args: _call(getattr(nv, name, None), h, *args)  # noqa: E731
            reasons = get("nvmlDeviceGetCurrentClocksEventReasons")
            if reasons is None:
                reasons = get("nvmlDeviceGetCurrentClocksThrottleReasons")
            util = get("nvmlDeviceGetUtilizationRates")
            power, limit = get("nvmlDeviceGetPowerUsage"), get("nvmlDeviceGetEnforcedPowerLimit")
            rows.append({
                "gpu": _label(index),
                "utilization_pct": getattr(util, "gpu", None) if util is not None else None,
                "sm_clock_mhz": get("nvmlDeviceGetClockInfo", getattr(nv, "NVML_CLOCK_SM", 1)),
                "mem_clock_mhz": get("nvmlDeviceGetClockInfo", getattr(nv, "NVML_CLOCK_MEM", 2)),
                "clock_reasons": list(decode_clock_reasons(reasons)) if isinstance(reasons, int) else None,
                "power_w": round(power / 1000, 1) if isinstance(power, int) else None,
                "power_limit_w": round(limit / 1000, 1) if isinstance(limit, int) else None,
                "temperature_c": get("nvmlDeviceGetTemperature", getattr(nv, "NVML_TEMPERATURE_GPU", 0)),
                "slowdown_c": get("nvmlDeviceGetTemperatureThreshold",
                                  getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)),
                "pcie_gen": get("nvmlDeviceGetCurrPcieLinkGeneration"),
                "pcie_gen_max": get("nvmlDeviceGetMaxPcieLinkGeneration"),
                "pcie_width": get("nvmlDeviceGetCurrPcieLinkWidth"),
                "pcie_width_max": get("nvmlDeviceGetMaxPcieLinkWidth"),
                "pstate": _pstate_name(get("nvmlDeviceGetPerformanceState")),
            })
        return rows

    def energy_j(self) -> dict[str, float | None]:
        """Each GPU's total energy counter (nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded, Volta
        and newer) in joules; None for a GPU without one."""
        rows: dict[str, float | None] = {}
        for index, h in self._handles:
            mj = _call(getattr(self._nv, "nvmlDeviceGetTotalEnergyConsumption", None), h)
            rows[_label(index)] = mj / 1000 if isinstance(mj, int) and mj >= 0 else None
        return rows

    def close(self) -> None:
        _call(getattr(self._nv, "nvmlShutdown", None))
