"""CPU topology facts: SMT siblings, packages, L3 (CCD/CCX) groups, hybrid performance/efficiency cores — and the
pure helpers the planners use to pin llama.cpp.

    topo = facts.get(CpuTopology)
    performance_cpus(topo)             # [0, 2, 4, ..., 14]: one logical CPU per physical performance core
    performance_cpus(topo, smt=True)   # [0, 1, ..., 15]: the same cores with their SMT siblings
    recommended_threads(topo)          # 8: the --threads / -t value
    taskset_list(topo)                 # "0,2,4,6,8,10,12,14": for `taskset -c` (or CPUAffinity=)
    taskset_command(topo)              # "taskset -c 0,2,...,14 llama-server -t 8 ..."
    l3_groups(topo)                    # [L3Group(cpus=(0..7, 16..23), size_kb=98304), ...]: CCDs / CCXs

Hybrid cores are classified from, in order: /sys/devices/cpu_core/cpus + /sys/devices/cpu_atom/cpus (Intel's
hybrid PMUs), per-CPU cpu_capacity (arm64 big.LITTLE), base_frequency, cpuinfo_max_freq (a gap of more than 20 %
between two frequency classes; per-core "favoured core" boosts differ by a few percent only), and on Intel the
core_id numbering (what coretemp's "Core N" labels show: P-cores step by 4, E-cores by 1). Each step is only used
when the ones before it say nothing.

The --threads rule (`recommended_threads`): llama.cpp's own default is `cpu_get_num_math()` (common/common.cpp):
on a hybrid x86 CPU it counts the non-efficiency cores, one thread per core ("hyperthreading isn't useful for
linear algebra", "efficiency cores harm lockstep threading"); otherwise `cpu_get_num_physical_cores()`, the number
of distinct thread_siblings sets. tunehost uses the same count — physical performance cores, never SMT siblings —
and also applies it where llama.cpp cannot tell (arm64 big.LITTLE, where llama.cpp counts the little cores too).
CPUs isolated with isolcpus= are left out (the scheduler never places unpinned threads there). Headroom: when those
threads would occupy every usable logical CPU (no SMT sibling and no efficiency core left for the OS, interrupts and
the server's HTTP thread), one core is kept free on hosts with more than 4 cores, because token generation runs in
lockstep and one preempted thread stalls all of them. `tunehost bench` can sweep around this value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.cpulist import format_cpu_list
from tunehost.facts.cpu import CPU_ROOT, CpuFacts, _cpu_list_or_empty

if TYPE_CHECKING:
    from tunehost.host import Host

CPU_CORE_CPUS = "/sys/devices/cpu_core/cpus"
CPU_ATOM_CPUS = "/sys/devices/cpu_atom/cpus"
HYBRID_GAP = 1.20  # two classes of cores differ by more than 20 % in capacity or clock
PERFORMANCE, EFFICIENCY = "performance", "efficiency"


@dataclass(frozen=True)
class LogicalCpu:
    cpu: int
    core_id: int | None = None
    package: int | None = None
    die: int | None = None
    siblings: tuple[int, ...] = ()  # SMT siblings including itself (thread_siblings_list / core_cpus_list)
    l3_id: int | None = None
    l3_cpus: tuple[int, ...] = ()  # cache/index3/shared_cpu_list
    l3_size_kb: int | None = None
    kind: str | None = None  # "performance" | "efficiency" | None (not hybrid, or unknown)


@dataclass(frozen=True)
class L3Group:
    cpus: tuple[int, ...]
    l3_id: int | None = None
    size_kb: int | None = None
    package: int | None = None


@dataclass(frozen=True)
class CpuTopology:
    cpus: tuple[LogicalCpu, ...] = ()  # online CPUs
    hybrid_source: str | None = None  # how performance/efficiency cores were told apart; None: not hybrid
    isolated: tuple[int, ...] = ()
    vendor: str | None = None
    model_name: str | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None  # why the topology is unknown

    @classmethod
    def gather(cls, host: "Host") -> "CpuTopology":
        return _gather(host)

    @property
    def hybrid(self) -> bool:
        return self.hybrid_source is not None

    @property
    def online(self) -> list[int]:
        return [c.cpu for c in self.cpus]

    @property
    def smt(self) -> bool:
        return any(len(c.siblings) > 1 for c in self.cpus)

    @property
    def packages(self) -> list[int]:
        return sorted({c.package for c in self.cpus if c.package is not None})

    def by_cpu(self) -> dict[int, LogicalCpu]:
        return {c.cpu: c for c in self.cpus}


# ---- pure helpers (planners call these; they never read the host) ----

def physical_cores(topo: CpuTopology) -> list[tuple[int, ...]]:
    """Each physical core as its online logical CPUs, ordered by its first CPU."""
    online = set(topo.online)
    seen: set[int] = set()
    cores: list[tuple[int, ...]] = []
    for c in topo.cpus:
        if c.cpu in seen:
            continue
        group = tuple(sorted(set(c.siblings or (c.cpu,)) & online | {c.cpu}))
        seen.update(group)
        cores.append(group)
    return sorted(cores)


def performance_cores(topo: CpuTopology) -> list[tuple[int, ...]]:
    """Physical cores llama.cpp should run on: the performance cores of a hybrid CPU (all cores otherwise),
    without isolated CPUs."""
    kinds = topo.by_cpu()
    isolated = set(topo.isolated)
    cores = [core for core in physical_cores(topo) if not set(core) & isolated]
    if topo.hybrid:
        cores = [core for core in cores if kinds[core[0]].kind == PERFORMANCE]
    return cores


def efficiency_cpus(topo: CpuTopology) -> list[int]:
    return [c.cpu for c in topo.cpus if c.kind == EFFICIENCY]


def performance_cpus(topo: CpuTopology, smt: bool = False) -> list[int]:
    """One logical CPU per physical performance core (its first SMT thread); with smt=True, all their threads."""
    cores = performance_cores(topo)
    return sorted(cpu for core in cores for cpu in (core if smt else core[:1]))


def recommended_threads(topo: CpuTopology) -> int | None:
    """The --threads value: physical performance cores (see the module docstring for the rule); None if unknown."""
    cores = performance_cores(topo)
    if not cores:
        return None
    usable = [c for c in topo.online if c not in set(topo.isolated)]
    n = len(cores)
    if n > 4 and n >= len(usable):
        n -= 1  # nothing left for the OS: keep one core free
    return n


def taskset_list(topo: CpuTopology) -> str:
    """The `taskset -c` CPU list: one thread per physical performance core."""
    return format_cpu_list(performance_cpus(topo))


def taskset_command(topo: CpuTopology, program: str = "llama-server") -> str | None:
    threads = recommended_threads(topo)
    if threads is None:
        return None
    cpus = performance_cpus(topo)[:threads]
    return f"taskset -c {format_cpu_list(cpus)} {program} -t {threads} ..."


def l3_groups(topo: CpuTopology) -> list[L3Group]:
    """The L3 domains (AMD CCDs/CCXs; one per socket on most Intel parts), ordered by first CPU."""
    groups: dict[tuple, L3Group] = {}
    for c in topo.cpus:
        if not c.l3_cpus and c.l3_id is None:
            continue
        key = (c.package, c.l3_id) if c.l3_id is not None else c.l3_cpus
        if key not in groups:
            members = tuple(sorted(x.cpu for x in topo.cpus
                                   if ((x.package, x.l3_id) if x.l3_id is not None else x.l3_cpus) == key))
            groups[key] = L3Group(members, c.l3_id, c.l3_size_kb, c.package)
    return sorted(groups.values(), key=lambda g: g.cpus[0])


# ---- gathering ----

def _gather(host: "Host") -> CpuTopology:
    files = host.files
    cpu = CpuFacts.gather(host)  # shared with the cpufreq checks (gathered once per host)
    if not cpu.online:
        return CpuTopology(vendor=cpu.vendor, model_name=cpu.model_name,
                           reason=cpu.reason or f"cannot tell which CPUs are online ({CPU_ROOT}/online)")
    online = list(cpu.online)
    evidence: dict[str, str] = {}
    info: dict[int, dict] = {n: {} for n in online}
    # SMT siblings: read once per core, not once per thread
    # SMT siblings share core_id, package and die: read once per physical core, not once per thread
    known_core: dict[int, dict] = {}
    for n in online:
        if n not in known_core:
            base = f"{CPU_ROOT}/cpu{n}/topology"
            text = files.read_value(f"{base}/thread_siblings_list") or files.read_value(f"{base}/core_cpus_list")
            siblings = tuple(_cpu_list_or_empty(text)) or (n,)
            if n not in siblings:
                siblings = (n,)
            row = {"siblings": siblings, "core_id": files.read_int(f"{base}/core_id")}
            for s in siblings:
                known_core.setdefault(s, row)
        info[n].update(known_core[n])
    # L3 and the package/die around it: read once per L3 group (an L3 never spans two dies)
    known_l3: dict[int, dict] = {}
    for n in online:
        if n not in known_l3:
            base = f"{CPU_ROOT}/cpu{n}"
            shared = tuple(_cpu_list_or_empty(files.read_value(f"{base}/cache/index3/shared_cpu_list")))
            entry = {"l3_id": files.read_int(f"{base}/cache/index3/id"), "l3_cpus": shared,
                     "l3_size_kb": _size_kb(files.read_value(f"{base}/cache/index3/size")),
                     "package": files.read_int(f"{base}/topology/physical_package_id"),
                     "die": files.read_int(f"{base}/topology/die_id")}
            for s in shared or (n,):
                known_l3.setdefault(s, entry)
        info[n].update(known_l3[n])

    kinds, source = _classify(host, cpu, info, evidence)
    cpus = tuple(LogicalCpu(n, kind=kinds.get(n), **info[n]) for n in online)
    if cpu.isolated:
        evidence[f"{CPU_ROOT}/isolated"] = format_cpu_list(cpu.isolated)
    return CpuTopology(cpus, source, tuple(c for c in cpu.isolated if c in set(online)), cpu.vendor,
                       cpu.model_name, evidence)


def _size_kb(text: str | None) -> int | None:
    match = re.fullmatch(r"([0-9]{1,12})\s*([KMG]?)B?", (text or "").strip(), re.IGNORECASE)
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 1, "M": 1024, "G": 1024 * 1024}[match.group(2).upper()] // (
        1024 if match.group(2) == "" else 1)


def _classify(host: "Host", cpu: CpuFacts, info: dict[int, dict],
              evidence: dict[str, str]) -> tuple[dict[int, str], str | None]:
    """cpu -> "performance"/"efficiency" and how it was known; ({}, None) for a non-hybrid (or unknown) CPU."""
    online = set(info)
    core_text = host.files.read_value(CPU_CORE_CPUS)
    atom_text = host.files.read_value(CPU_ATOM_CPUS)
    if core_text is not None or atom_text is not None:
        p_cpus = set(_cpu_list_or_empty(core_text)) & online
        e_cpus = set(_cpu_list_or_empty(atom_text)) & online
        if p_cpus and e_cpus:
            evidence[CPU_CORE_CPUS] = core_text or ""
            evidence[CPU_ATOM_CPUS] = atom_text or ""
            kinds = {n: PERFORMANCE for n in p_cpus}
            kinds.update({n: EFFICIENCY for n in e_cpus})
            return kinds, "cpu_core/cpu_atom"
    per_cpu = {c.cpu: c for c in cpu.per_cpu}
    for attr, name, source in (("capacity", "cpu_capacity", "cpu_capacity"),
                               ("base_khz", "base_frequency", "base_frequency"),
                               ("cpuinfo_max_khz", "cpuinfo_max_freq", "cpuinfo_max_freq")):
        values = {n: getattr(per_cpu[n], attr) for n in online if n in per_cpu}
        split = _two_classes(values)
        if split:
            big, little = split
            glob = (f"{CPU_ROOT}/cpu*/{name}" if attr == "capacity"
                    else next(iter(cpu.grouped_evidence(name))))
            evidence[glob] = (f"{format_cpu_list(sorted(big))}: {_span(values, big)}; "
                              f"{format_cpu_list(sorted(little))}: {_span(values, little)}")
            kinds = {n: PERFORMANCE for n in big}
            kinds.update({n: EFFICIENCY for n in little})
            return kinds, source
    if cpu.vendor == "GenuineIntel":
        kinds = _intel_core_id_split(info)
        if kinds:
            evidence[f"{CPU_ROOT}/cpu*/topology/core_id"] = ", ".join(
                f"cpu{n}={info[n]['core_id']}" for n in sorted(info))
            return kinds, "core_id numbering"
    return {}, None


def _span(values: Mapping[int, int], cpus: set[int]) -> str:
    vals = sorted({values[n] for n in cpus})
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"


def _two_classes(values: Mapping[int, int | None]) -> tuple[set[int], set[int]] | None:
    """Split CPUs into (big, little) at the widest gap between distinct values, if it exceeds HYBRID_GAP.
    Every CPU must have a value: a partial reading says nothing."""
    if not values or any(v is None or v <= 0 for v in values.values()):
        return None
    distinct = sorted(set(values.values()))  # type: ignore[type-var]
    if len(distinct) < 2:
        return None
    ratio, cut = max((distinct[i + 1] / distinct[i], distinct[i + 1]) for i in range(len(distinct) - 1))  # type: ignore[operator]
    if ratio <= HYBRID_GAP:
        return None
    big = {n for n, v in values.items() if v >= cut}  # type: ignore[operator]
    little = set(values) - big
    return big, little


def _intel_core_id_split(info: Mapping[int, dict]) -> dict[int, str]:
    """Hybrid Intel core numbering (coretemp "Core N" labels are these core_ids): the P-cores come first with
    core_ids stepping by 2 or more (4 on Alder/Raptor Lake), then E-cores stepping by 1, in one package."""
    if len({row.get("package") for row in info.values()}) > 1:
        return {}
    firsts: dict[int, int] = {}
    for n in sorted(info):
        core = info[n].get("core_id")
        if core is None:
            return {}
        firsts.setdefault(core, n)
    ids = sorted(firsts, key=lambda core: firsts[core])
    if len(ids) < 4:
        return {}
    steps = [b - a for a, b in zip(ids, ids[1:])]
    # find k: steps[:k-1] all equal s >= 2, steps[k:] all 1
    for k in range(2, len(ids) - 1):
        head, tail = steps[:k - 1], steps[k:]
        if head and len(set(head)) == 1 and head[0] >= 2 and tail and set(tail) == {1} and steps[k - 1] >= 1:
            p_ids = set(ids[:k])
            return {n: (PERFORMANCE if info[n]["core_id"] in p_ids else EFFICIENCY) for n in info}
    return {}
