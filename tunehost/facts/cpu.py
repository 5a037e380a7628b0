"""CPU frequency facts: the cpufreq driver and its mode, and per online CPU the governor, EPP and frequency limits.

    cpu = facts.get(CpuFacts)
    cpu.driver          # "intel_pstate", "intel_cpufreq", "amd-pstate-epp", "amd-pstate", "acpi-cpufreq", ...
    cpu.mode            # "active" | "passive" | "guided" | "generic" (a driver with plain cpufreq governors) | None
    cpu.per_cpu         # one CpuFreq per online CPU that has cpufreq, in CPU order
    cpu.group("governor")  # {"powersave": [0, 1, ...], "performance": [...]}: who disagrees with whom

Each CPU's cpufreq directory is /sys/devices/system/cpu/cpuN/cpufreq (on a live host a link to ../cpufreq/policyM);
a snapshot or dump that stores only /sys/devices/system/cpu/cpufreq/policyM is read through the policies'
affected_cpus (or policyN for cpuN when that file is absent too). No cpufreq at all (VMs, containers) is
`has_cpufreq == False` with `reason`.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from tunehost.cpulist import ONLINE, format_cpu_list, parse_cpu_list
from tunehost.errors import TunehostError
from tunehost.facts.chassis import is_virtual

if TYPE_CHECKING:
    from tunehost.host import Host

CPU_ROOT = "/sys/devices/system/cpu"
CPUFREQ_ROOT = f"{CPU_ROOT}/cpufreq"
BOOST = f"{CPUFREQ_ROOT}/boost"
INTEL_PSTATE = f"{CPU_ROOT}/intel_pstate"
INTEL_PSTATE_FILES = ("status", "no_turbo", "min_perf_pct", "max_perf_pct", "hwp_dynamic_boost")
AMD_PSTATE_STATUS = f"{CPU_ROOT}/amd_pstate/status"
CPUINFO = "/proc/cpuinfo"

# cpufreq attribute file -> CpuFreq field
PER_CPU_FILES = {
    "scaling_governor": "governor",
    "energy_performance_preference": "epp",
    "cpuinfo_max_freq": "cpuinfo_max_khz",
    "scaling_max_freq": "scaling_max_khz",
    "scaling_min_freq": "scaling_min_khz",
    "base_frequency": "base_khz",
}
INT_FIELDS = {"cpuinfo_max_khz", "scaling_max_khz", "scaling_min_khz", "base_khz"}
ACTIVE_DRIVERS = {"intel_pstate": "active", "amd-pstate-epp": "active", "intel_cpufreq": "passive"}

_GATHERED: "weakref.WeakKeyDictionary[Host, CpuFacts]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class CpuFreq:
    """One online CPU's cpufreq view (None: the file is absent or garbled). Frequencies are in kHz, as sysfs has them."""

    cpu: int
    directory: str  # the cpufreq directory it was read from
    governor: str | None = None
    epp: str | None = None
    cpuinfo_max_khz: int | None = None
    scaling_max_khz: int | None = None
    scaling_min_khz: int | None = None
    base_khz: int | None = None
    capacity: int | None = None  # /sys/devices/system/cpu/cpuN/cpu_capacity (arm64 big.LITTLE, newer x86 hybrid)

    def path(self, name: str) -> str:
        return f"{self.directory}/{name}"


@dataclass(frozen=True)
class CpuFacts:
    online: tuple[int, ...] | None  # None: /sys/devices/system/cpu/online unreadable and no cpuN directories
    vendor: str | None = None  # "GenuineIntel", "AuthenticAMD", ... (x86 /proc/cpuinfo vendor_id)
    model_name: str | None = None
    driver: str | None = None
    available_governors: tuple[str, ...] = ()
    available_epp: tuple[str, ...] = ()
    per_cpu: tuple[CpuFreq, ...] = ()
    missing_cpufreq: tuple[int, ...] = ()  # online CPUs without a cpufreq directory
    intel_pstate: Mapping[str, str] = field(default_factory=dict)  # status, no_turbo, min/max_perf_pct, ...
    amd_pstate_status: str | None = None
    boost: str | None = None  # raw /sys/devices/system/cpu/cpufreq/boost ("0"/"1")
    isolated: tuple[int, ...] = ()  # /sys/devices/system/cpu/isolated (isolcpus=)
    evidence: Mapping[str, str] = field(default_factory=dict)  # global files as read
    reason: str | None = None  # why there is no cpufreq information

    @classmethod
    def gather(cls, host: "Host") -> "CpuFacts":
        # CpuTopology gathers these too; a snapshot never changes, so it is read once. A live host is re-read
        # every time: tuning gathers again after writing to verify.
        cached = _GATHERED.get(host) if host.snapshot_dir is not None else None
        if cached is not None:
            return cached
        facts = _gather(host)
        if host.snapshot_dir is not None:
            _GATHERED[host] = facts
        return facts

    @property
    def has_cpufreq(self) -> bool:
        return bool(self.per_cpu)

    @property
    def mode(self) -> str | None:
        """active (the driver picks frequencies itself, EPP steers it), passive/guided (a cpufreq governor decides),
        generic (acpi-cpufreq, cppc_cpufreq, ...: a governor decides), or None without cpufreq."""
        if not self.driver:
            return None
        if self.driver in ACTIVE_DRIVERS:
            return ACTIVE_DRIVERS[self.driver]
        if self.driver == "amd-pstate":
            return self.amd_pstate_status if self.amd_pstate_status in ("passive", "guided") else "passive"
        return "generic"

    @property
    def driver_evidence(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.per_cpu and self.driver:
            out[self.per_cpu[0].path("scaling_driver")] = self.driver
        if "status" in self.intel_pstate:
            out[f"{INTEL_PSTATE}/status"] = self.intel_pstate["status"]
        if self.amd_pstate_status:
            out[AMD_PSTATE_STATUS] = self.amd_pstate_status
        return out

    @property
    def nominal_khz(self) -> int | None:
        """The CPU's rated base clock: base_frequency where the driver exposes it, else the "@ 2.40GHz" of the
        model name. None when neither says."""
        bases = [c.base_khz for c in self.per_cpu if c.base_khz]
        if bases:
            return max(bases)
        if self.model_name:
            match = re.search(r"@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz", self.model_name)
            if match:
                return int(float(match.group(1)) * 1_000_000)
        return None

    def group(self, attr: str, cpus: Iterable[CpuFreq] | None = None) -> dict[str | int | None, list[int]]:
        """CPUs grouped by one CpuFreq field's value, in order of first appearance."""
        groups: dict[str | int | None, list[int]] = {}
        for c in self.per_cpu if cpus is None else cpus:
            groups.setdefault(getattr(c, attr), []).append(c.cpu)
        return groups

    def grouped_evidence(self, name: str, cpus: Iterable[CpuFreq] | None = None) -> dict[str, str]:
        """{glob path: "0-7: performance; 8-15: powersave"} for one cpufreq file over the CPUs (all by default).
        One value on every CPU reads "performance (all 16 CPUs)"."""
        chosen = list(self.per_cpu if cpus is None else cpus)
        if not chosen:
            return {}
        attr = PER_CPU_FILES.get(name, name)
        groups = self.group(attr, chosen)
        dirs = {c.directory.rsplit("/", 1)[0] for c in chosen}
        glob = (f"{CPU_ROOT}/cpu*/cpufreq/{name}" if all(c.directory.endswith("/cpufreq") for c in chosen)
                else f"{CPUFREQ_ROOT}/policy*/{name}" if dirs == {CPUFREQ_ROOT} else f"{CPU_ROOT}/*/{name}")
        if len(groups) == 1:
            [(value, members)] = groups.items()
            return {glob: f"{_raw(value)} (all {len(members)} CPUs)"}
        return {glob: "; ".join(f"{format_cpu_list(m)}: {_raw(v)}" for v, m in groups.items())}


def _raw(value: object) -> str:
    return "(absent)" if value is None else str(value)


def _gather(host: "Host") -> CpuFacts:
    files = host.files
    evidence: dict[str, str] = {}
    online = online_cpus(host)
    if online is None:
        online = _present_cpus(host)
    vendor, model = _cpuinfo_identity(files.read(CPUINFO))
    isolated = _cpu_list_or_empty(files.read_value(f"{CPU_ROOT}/isolated"))
    intel: dict[str, str] = {}
    for name in INTEL_PSTATE_FILES:
        value = files.read_value(f"{INTEL_PSTATE}/{name}")
        if value is not None:
            intel[name] = value
            evidence[f"{INTEL_PSTATE}/{name}"] = value
    amd_status = files.read_value(AMD_PSTATE_STATUS)
    if amd_status is not None:
        evidence[AMD_PSTATE_STATUS] = amd_status
    boost = files.read_value(BOOST)
    if boost is not None:
        evidence[BOOST] = boost
    base = CpuFacts(online=tuple(online) if online is not None else None, vendor=vendor, model_name=model,
                    intel_pstate=intel, amd_pstate_status=amd_status, boost=boost, isolated=tuple(isolated),
                    evidence=evidence)
    if not online:
        return _replace(base, reason=f"cannot tell which CPUs are online ({CPU_ROOT}/online is unreadable "
                                              "or not a CPU list this kernel can have)")

    per_cpu: list[CpuFreq] = []
    missing: list[int] = []
    driver = governors = epps = None
    policies: dict[int, str] | None = None
    template: set[str] | None = None  # the first CPU's cpufreq files: the others have the same set
    for cpu in online:
        # cpuN/cpufreq, else the policy listing it in affected_cpus, else policyN (dumps that kept policies only)
        directory = f"{CPU_ROOT}/cpu{cpu}/cpufreq"
        values: dict[str, object] = {}
        names: set[str] = set()
        if template is not None:  # no listdir per CPU on big hosts: read the template's files directly
            values = _read_cpufreq(files, directory, template)
            names = template if any(v is not None for v in values.values()) else set()
        if not names:
            names = set(files.listdir(directory))
            if not names:
                if policies is None:
                    policies = _policy_map(host)
                directory = policies.get(cpu, "")
                names = set(files.listdir(directory)) if directory else set()
            if not names:
                missing.append(cpu)
                continue
            values = _read_cpufreq(files, directory, names)
            if template is None and directory.endswith("/cpufreq"):
                template = names
        values["capacity"] = files.read_int(f"{CPU_ROOT}/cpu{cpu}/cpu_capacity") if _has_capacity(host) else None
        if driver is None and "scaling_driver" in names:
            driver = files.read_value(f"{directory}/scaling_driver")
        if governors is None and "scaling_available_governors" in names:
            governors = (files.read_value(f"{directory}/scaling_available_governors") or "").split()
        if epps is None and "energy_performance_available_preferences" in names:
            epps = (files.read_value(f"{directory}/energy_performance_available_preferences") or "").split()
        per_cpu.append(CpuFreq(cpu, directory, **values))  # type: ignore[arg-type]
    reason = None
    if not per_cpu:
        reason = ("no cpufreq in this VM/container: the hypervisor controls frequency" if is_virtual(host)
                  else f"no cpufreq directory for any online CPU ({CPU_ROOT}/cpu*/cpufreq absent: "
                       "no cpufreq driver loaded, or frequency is managed by firmware/hypervisor)")
    return _replace(base, driver=driver, available_governors=tuple(governors or ()), available_epp=tuple(epps or ()),
                    per_cpu=tuple(per_cpu), missing_cpufreq=tuple(missing), reason=reason)


def _read_cpufreq(files, directory: str, names: set[str]) -> dict[str, object]:
    values: dict[str, object] = {}
    for name, attr in PER_CPU_FILES.items():
        if name in names:
            raw = files.read_value(f"{directory}/{name}")
            values[attr] = _to_int(raw) if attr in INT_FIELDS else raw
    return values


def _replace(facts: CpuFacts, **changes: object) -> CpuFacts:
    from dataclasses import replace

    return replace(facts, **changes)


def _to_int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw.split()[0])
    except (ValueError, IndexError):
        return None
    return value if value >= 0 else None


def _cpu_list_or_empty(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return parse_cpu_list(text)
    except TunehostError:
        return []


def _present_cpus(host: "Host") -> list[int] | None:
    """Fallback when /sys/devices/system/cpu/online is absent: the cpuN directories not marked offline."""
    cpus = []
    for name in host.files.listdir(CPU_ROOT):
        if re.fullmatch(r"cpu[0-9]+", name):
            cpu = int(name[3:])
            if host.files.read_value(f"{CPU_ROOT}/{name}/online") != "0":
                cpus.append(cpu)
    return sorted(cpus) or None


def _policy_map(host: "Host") -> dict[int, str]:
    files = host.files
    found: dict[int, str] = {}
    fallback: dict[int, str] = {}
    for name in files.listdir(CPUFREQ_ROOT):
        if not re.fullmatch(r"policy[0-9]+", name):
            continue
        directory = f"{CPUFREQ_ROOT}/{name}"
        fallback[int(name[6:])] = directory
        listed = files.read_value(f"{directory}/affected_cpus") or files.read_value(f"{directory}/related_cpus")
        for cpu in _cpu_list_or_empty((listed or "").replace(" ", ",")):
            found.setdefault(cpu, directory)
    for cpu, directory in fallback.items():
        found.setdefault(cpu, directory)
    return found


_capacity_cache: "weakref.WeakKeyDictionary[Host, bool]" = weakref.WeakKeyDictionary()


def _has_capacity(host: "Host") -> bool:
    """cpu_capacity exists on all CPUs or none: probe cpu0's once instead of a failed read per CPU."""
    if host not in _capacity_cache:
        _capacity_cache[host] = any(host.files.exists(f"{CPU_ROOT}/cpu{n}/cpu_capacity") for n in (0, 1))
    return _capacity_cache[host]


def _cpuinfo_identity(text: str | None) -> tuple[str | None, str | None]:
    """vendor_id and model name of the first processor block of /proc/cpuinfo."""
    if not text:
        return None, None
    vendor = model = None
    for line in text.partition("\n\n")[0].splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "vendor_id" and value:
            vendor = value
        elif key in ("model name", "Model Name") and value:
            model = value
    return vendor, model


def online_cpus(host: "Host") -> list[int] | None:
    """The online CPUs from sysfs; None when the file is absent or garbled (unknown, never a guess)."""
    text = host.files.read_value(ONLINE)
    if text is None:
        return None
    try:
        return parse_cpu_list(text)
    except TunehostError:
        return None
