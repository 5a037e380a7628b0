"""RAM facts: the memory modules (`dmidecode -t memory`), the chassis type, and the NUMA nodes.

    RamFacts.gather(host)   # modules with their rated speed and channel, chassis, CPU model
    NumaFacts.gather(host)  # /sys/devices/system/node/node*/{cpulist,meminfo,distance}, numa_balancing

Both never raise: what cannot be read is None plus a reason (`RamFacts.unavailable`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.bounds import whole_text
from tunehost.cpulist import parse_cpu_list
from tunehost.errors import TunehostError
from tunehost.facts.cpu_memory import CpuMemory, cpu_memory
from tunehost.facts.memory_parts import (JEDEC_MAX, PartFamily, PartRating, generation, is_dram_chip, is_standard_grade,
                                   module_family, module_vendor, rated_speed, snap_grade)
from tunehost.facts.chassis import CHASSIS_NAMES, CHASSIS_TYPE, machine_layers, who_decides
from tunehost.parsers.dmidecode import DmiMemory, MemoryDevice, parse_dmidecode_memory
from tunehost.parsers.udev_dmi import UDEV_DMI, parse_udev_dmi_memory

if TYPE_CHECKING:
    from tunehost.host import Host

DMIDECODE_MEMORY = ("dmidecode", "-t", "memory")
DMIDECODE_LINE = " ".join(DMIDECODE_MEMORY)
DMI_ID = "/sys/class/dmi/id"
PRODUCT_NAME = f"{DMI_ID}/product_name"
BOARD_NAME = f"{DMI_ID}/board_name"
SYS_VENDOR = f"{DMI_ID}/sys_vendor"
CPUINFO = "/proc/cpuinfo"
NODE_DIR = "/sys/devices/system/node"
NODE_ONLINE = f"{NODE_DIR}/online"
NODE_HAS_CPU = f"{NODE_DIR}/has_cpu"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"

NEEDS_ROOT = "dmidecode needs root: run `sudo tunehost doctor`"
NOT_INSTALLED = "dmidecode is not installed (apt install dmidecode)"

_BANK_CHANNEL = re.compile(r"\bP(\d{1,4})[\s_-]*CHANNEL[\s_-]*([A-Z])\b", re.I)               # AMD: "P0 CHANNEL A"
_CONTROLLER_CHANNEL = re.compile(r"Controller(\d+)[\s_-]*Channel([A-Z])", re.I)          # "Controller0-ChannelA-DIMM1"
_CONTROLLER_DIMM = re.compile(r"Controller(\d+)[\s_-]*DIMM([A-Z])\d", re.I)              # "Controller0-DIMMA2"
_CONTROLLER_SLOT = re.compile(r"^Controller(\d+)[\s_-]*DIMM\d$", re.I)  # Intel DDR5 "Controller1-DIMM0": one channel each
_CPU_DIMM = re.compile(r"\b(?:CPU|P|Proc)(\d{1,4})[\s_-]*DIMM[\s_-]*([A-Z])\d", re.I)         # "CPU1 DIMM A1", "P1-DIMMA1"
_DIMM_SOCKET_LETTER = re.compile(r"^DIMM[\s_-]*P(\d{1,2})[\s_-]*([A-H])\d\b", re.I)               # "DIMM_P0_A1"
_CHANNEL = re.compile(r"Channel[\s_-]*([A-Z])\b", re.I)                                  # "ChannelA-DIMM0"
_SLOT_LETTER = re.compile(r"^(?:DIMM|DDR\d?|MEM|SLOT)[\s_-]*([A-Z])[\s_-]?\d\b", re.I)    # "DIMMA1", "DDR5-A2", "DIMM_B1"


def channel_of(locator: str | None, bank_locator: str | None) -> tuple[str, str] | None:
    """(socket, channel) a slot belongs to, from its Locator / Bank Locator; None when the names do not say.

    "P0 CHANNEL B" -> ("P0", "B"); "Controller1-ChannelA-DIMM1" -> ("P0", "C1-A"); "DDR5-A2" -> ("P0", "A").
    Names like "A1".."B16" (Dell: socket letter + slot number) or "DIMM1" do not name a channel.
    """
    loc, bank = locator or "", bank_locator or ""
    if m := _BANK_CHANNEL.search(bank):
        return f"P{int(m[1])}", m[2].upper()
    if m := _CONTROLLER_CHANNEL.search(loc):
        return "P0", f"C{m[1]}-{m[2].upper()}"
    if m := _CONTROLLER_DIMM.search(loc):
        return "P0", f"C{m[1]}-{m[2].upper()}"
    if m := _CONTROLLER_SLOT.match(loc):
        return "P0", f"C{m[1]}"
    if m := _CPU_DIMM.search(loc):
        return f"{m[0].split(m[1])[0].strip().upper()}{int(m[1])}", m[2].upper()
    if m := _BANK_CHANNEL.search(loc):
        return f"P{int(m[1])}", m[2].upper()
    for text in (loc, bank):
        if m := _CHANNEL.search(text):
            return "P0", m[1].upper()
    if m := _DIMM_SOCKET_LETTER.match(loc):
        return f"P{int(m[1])}", m[2].upper()
    if m := _SLOT_LETTER.match(loc):
        return "P0", m[1].upper()
    return None


_SOCKET = (re.compile(r"\bPROC\s*(\d{1,2})\s+DIMM", re.I),            # HPE: "PROC 1 DIMM 12"
           re.compile(r"^(?:CPU|P|Proc)(\d{1,2})[\s_-]", re.I),           # "CPU1_DIMM_A1", "P2-DIMMA1", "P1_DIMMA1"
           re.compile(r"^(?:CPU|P)\s*(\d{1,2})$", re.I))                  # Bank Locator "CPU1", "P0"
_DELL_SOCKET = re.compile(r"^([A-H])\d{1,2}$")                             # Dell PowerEdge: socket letter + slot "B3"


def socket_of(locator: str | None, bank_locator: str | None) -> str | None:
    """The CPU socket a slot hangs off, as named ("1", "2", "A", "B"), when the Locator or Bank Locator says; None
    otherwise. Unlike channel_of it needs no channel in the name ("PROC 2 DIMM 4", Dell "B3", bank "CPU2")."""
    loc, bank = (locator or "").strip(), (bank_locator or "").strip()
    for text in (loc, bank):
        for pattern in _SOCKET:
            if m := pattern.search(text):
                return str(int(m[1]))
    if m := _DELL_SOCKET.match(loc):
        return m[1]
    return None


@dataclass(frozen=True)
class Module:
    """One installed module (or soldered package), with what tunehost knows about its rating."""

    device: MemoryDevice
    slot: tuple[str, str] | None                 # (socket, channel) or None when the names do not say
    rating: int | None                          # rated data rate, MT/s
    rating_source: str | None                   # how the rating was found
    profile: bool | None                        # the rating is an XMP/EXPO profile (None: unknown)
    part_rating: PartRating | None = None
    speed_field_bogus: bool = False             # `Speed` is not a real data rate (e.g. 12800 on DDR5-5600)
    half_rate: bool = False                     # `Configured` is half of `Speed`: old AGESA reports MEMCLK
    mem_type: str | None = None                 # the type, "<OUT OF SPEC>" resolved (old dmidecode on DDR5)
    family: PartFamily | None = None            # a part family that carries no rating (JEDEC-only or kit)
    rating_unknown: str | None = None           # why the rating is unknown on purpose (a kit not saying it)

    @property
    def effective_mts(self) -> int | None:
        """The real data rate: Configured, doubled when the firmware reports MEMCLK (the AMD half-rate quirk), and
        firmware rounding ("2999", "3599") read as the grade it stands for."""
        configured = self.device.configured_mts
        if configured and self.half_rate:
            configured *= 2
        if configured and not is_standard_grade(configured) and abs(snap_grade(configured) - configured) <= 4:
            configured = snap_grade(configured)
        return configured if is_standard_grade(configured) else None  # "29561 MT/s" is firmware garbage

    @property
    def soldered(self) -> bool:
        """On the board: "Row Of Chips", LPDDR, or a DRAM package's part number however the firmware labels it."""
        return self.device.soldered or is_dram_chip(self.device.part_number)

    @property
    def speed_field(self) -> int | None:
        """The Speed field when it is a real grade (the module's own top JEDEC speed on notebooks, servers)."""
        speed = self.device.speed_mts
        return speed if is_standard_grade(speed) and not self.speed_field_bogus else None

    @property
    def name(self) -> str:
        d = self.device
        where = d.locator or d.handle
        if d.bank_locator and not re.fullmatch(r"BANK\s*\d+", d.bank_locator, re.I):
            return f"{where} ({d.bank_locator})"
        return where


OUT_OF_SPEC = "<OUT OF SPEC>"
# the slowest JEDEC bin of each generation sold in PCs: a `Speed` below it is a clock in MHz, not a data rate
LOWEST_BIN = {"DDR3": 1066, "DDR4": 1600, "DDR5": 3200}


def resolve_type(device: MemoryDevice, part: PartRating | None) -> str | None:
    """The memory type; dmidecode older than 3.3 prints `<OUT OF SPEC>` for DDR5 (and LPDDR5): every type it knows
    (DDR4 and older) it names, so an out-of-spec DIMM is DDR5 — confirmed by the part number or a DDR5 speed/width."""
    t = device.type
    if t is None or t.strip().upper() != OUT_OF_SPEC:
        return t
    if part is not None and part.gen:
        return part.gen
    fastest = max(device.speed_mts or 0, device.configured_mts or 0)
    if device.soldered or (device.form_factor or "").lower() in {"row of chips", "chip"}:
        return "LPDDR5" if fastest >= 4266 else None
    if fastest >= 4000 or device.total_width == 80:   # DDR5 JEDEC bins start at 4000 (DDR5-4000); ECC DDR5 is 80-bit
        return "DDR5"
    return None


def describe_module(device: MemoryDevice) -> Module:
    """Rating, channel and quirks of one installed device (pure; used by RamFacts.gather and tests)."""
    part = rated_speed(device.part_number)
    family = None if part else module_family(device.part_number)
    vendor = module_vendor(device.manufacturer)
    mem_type = resolve_type(device, part)
    gen = generation(mem_type)
    speed = device.speed_mts
    low = LOWEST_BIN.get(generation(resolve_type(device, part)) or "")
    # (not on registered DIMMs: a server with 3 RDIMMs per channel really runs DDR3 at 800 MT/s)
    clock_units = bool(low and speed and speed < low and (device.configured_mts or 0) < low and not device.registered)
    if clock_units:
        speed = snap_grade(speed * 2)  # old AMD AM3+ firmware: both fields hold the clock (MHz), half the data rate
    if speed is not None and not is_standard_grade(speed) and is_standard_grade(snap_grade(speed)) \
            and abs(snap_grade(speed) - speed) <= 2:
        speed = snap_grade(speed)  # "2999 MT/s", "3199 MT/s": firmware rounding of a real grade
    speed_ok = is_standard_grade(speed)
    bogus = speed is not None and not speed_ok
    rating: int | None = None
    source: str | None = None
    profile: bool | None = None
    unknown: str | None = None
    shown = device.part_number or "not reported"
    if part is not None:
        if speed_ok and abs(speed - part.speed_mts) <= part.speed_mts * 0.02:
            rating, source = speed, f"Speed {speed} MT/s, matching part number {part.part}"
        else:
            rating, source = part.speed_mts, f"part number {part.describe()}"
        profile = part.profile
    elif speed_ok and gen and speed > JEDEC_MAX[gen]:
        # above every JEDEC bin: the board reports the XMP/EXPO rate in Speed (some MSI/Gigabyte BIOSes)
        rating, source, profile = speed, f"Speed field {speed} MT/s (above every JEDEC {gen} speed: an XMP/EXPO rate)", True
    elif family is not None and family.jedec and speed_ok:
        rating, source, profile = speed, f"Speed field {speed} MT/s ({family.vendor} {family.rule})", False
    elif (family is not None and not family.jedec) or (family is None and vendor is not None and vendor[1]):
        who = family.vendor if family is not None else vendor[0]  # type: ignore[index]
        unknown = (f"{who} sells XMP/EXPO kits and the part number ({shown}) does not say this module's rating"
                   + (f"; Speed {speed} MT/s is only its JEDEC speed" if speed_ok else ""))
    elif speed_ok:
        rating, source = speed, f"Speed field {speed} MT/s (part number {shown} not decoded)"
        profile = False if gen else None
    configured = device.configured_mts
    half = clock_units or bool(speed_ok and configured and abs(configured * 2 - speed) <= 2  # type: ignore[operator]
                               and gen in {"DDR3", "DDR4", "DDR5"})
    return Module(device, channel_of(device.locator, device.bank_locator), rating, source, profile, part, bogus, half,
                  mem_type, family, unknown)


def summarize_modules(modules: tuple[Module, ...] | list[Module]) -> str:
    """One evidence line per kind of module: "2x F5-6000J3238F16G 16 GB DDR5 DIMM, Speed 4800 MT/s, Configured 4800 MT/s"."""
    groups: Counter[str] = Counter()
    order: list[str] = []
    for m in modules:
        d = m.device
        size = f"{d.size_mb // 1024} GB" if d.size_mb and d.size_mb % 1024 == 0 else f"{d.size_mb} MB"
        form = "RDIMM" if d.registered and (d.form_factor or "").upper() == "DIMM" else d.form_factor or "?"
        text = (f"{d.part_number or 'unknown part'} {size} {d.type or '?'} {form}, "
                f"Speed {d.speed_mts or 'Unknown'} MT/s, Configured {d.configured_mts or 'Unknown'} MT/s")
        if text not in groups:
            order.append(text)
        groups[text] += 1
    return "; ".join(f"{groups[t]}x {t}" for t in order)


def _is_root(host: "Host") -> bool | None:
    """Whether the run has root: live -> euid; snapshot -> the writer's "uid" in manifest.json (None if absent)."""
    if host.live:
        try:
            return os.geteuid() == 0
        except AttributeError:  # not POSIX
            return None
    uid = host.manifest.get("uid")
    return uid == 0 if isinstance(uid, int) else None


def _cpu_model(host: "Host") -> tuple[str | None, int | None]:
    """(model name, CPU packages) from /proc/cpuinfo; packages None when it has no "physical id" lines."""
    text = host.files.read(CPUINFO) or ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    packages = set(re.findall(r"^physical id\s*:\s*(\d+)\s*$", text, re.M))
    return (m.group(1).strip() if m else None), (len(packages) or None)


def _not_installed(host: "Host") -> str:
    """Why there is no module list without dmidecode; in a guest or a container installing it would not help."""
    layers = machine_layers(host)
    if not layers:
        return NOT_INSTALLED
    kind = layers[-1]
    return (f"{who_decides(kind, layers)} the memory speed "
            f"(dmidecode here would show at most what the {'hypervisor' if 'virtual machine' in layers else 'host'} "
            "reports; judge the modules on the " + ("physical host itself)" if len(layers) > 1 else "host itself)"))


@dataclass(frozen=True)
class RamFacts:
    memory: DmiMemory | None                      # None: could not be read (see `unavailable`)
    unavailable: str | None = None
    modules: tuple[Module, ...] = ()
    chassis_type: int | None = None
    product: str | None = None                   # "vendor product (board)" for messages
    cpu_model: str | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)
    source: str = DMIDECODE_LINE                  # where the modules were read: dmidecode, or systemd's udev copy
    sockets: int | None = None                   # CPU packages (distinct "physical id" in /proc/cpuinfo)

    @property
    def cpu(self) -> CpuMemory | None:
        """The CPU's memory controller (tunehost/data/cpu_memory.csv), None when the model is not in the data."""
        return cpu_memory(self.cpu_model)

    @property
    def chassis_name(self) -> str | None:
        if self.chassis_type is None:
            return None
        return CHASSIS_NAMES.get(self.chassis_type, f"type {self.chassis_type}")

    @property
    def slots(self) -> tuple[tuple[str, str] | None, ...]:
        """(socket, channel) of every device, installed or empty."""
        return tuple(channel_of(d.locator, d.bank_locator) for d in (self.memory.devices if self.memory else ()))

    @property
    def slot_count(self) -> int:
        if not self.memory:
            return 0
        declared = sum(a.number_of_devices or 0 for a in self.memory.arrays)
        return max(declared, len(self.memory.devices))

    @classmethod
    def from_text(cls, text: str, *, chassis_type: int | None = None, cpu_model: str | None = None,
                  product: str | None = None, udev: bool = False, sockets: int | None = None) -> "RamFacts":
        """Facts from a `dmidecode -t memory` text (or, udev=True, a `/run/udev/data/+dmi:id` text) alone."""
        memory = parse_udev_dmi_memory(text) if udev else parse_dmidecode_memory(text)
        source = UDEV_DMI if udev else DMIDECODE_LINE
        modules = tuple(describe_module(d) for d in memory.installed)
        evidence = {source: summarize_modules(modules)}
        if chassis_type is not None:
            evidence[CHASSIS_TYPE] = str(chassis_type)
        return cls(memory if modules else None, None if modules else "no installed memory modules found", modules,
                   chassis_type, product, cpu_model, evidence, source, sockets)

    @classmethod
    def _from_udev(cls, host: "Host", evidence: dict, common: dict, why: str) -> "RamFacts | None":
        """The modules from systemd's udev copy of the SMBIOS tables, when dmidecode cannot be used (`why`)."""
        memory = parse_udev_dmi_memory(host.files.read(UDEV_DMI))
        modules = tuple(describe_module(d) for d in memory.installed)
        if not modules:
            return None
        ev = {k: v for k, v in evidence.items() if k != DMIDECODE_LINE}
        ev[UDEV_DMI] = summarize_modules(modules)
        ev[DMIDECODE_LINE] = f"not used: {why}"
        return cls(memory, None, modules, evidence=ev, source=UDEV_DMI, **common)

    @classmethod
    def gather(cls, host: "Host") -> "RamFacts":
        evidence: dict[str, str] = {}
        raw_chassis = host.files.read_value(CHASSIS_TYPE)
        chassis: int | None = None
        if raw_chassis is not None:
            evidence[CHASSIS_TYPE] = raw_chassis
            try:
                chassis = int(raw_chassis.split()[0])
            except (ValueError, IndexError):
                chassis = None
        names = [host.files.read_value(p) for p in (SYS_VENDOR, PRODUCT_NAME, BOARD_NAME)]
        product = " ".join(n for n in names[:2] if n) or None
        if names[2] and product:
            product = f"{product} (board {names[2]})"
        cpu_model, sockets = _cpu_model(host)
        common = dict(chassis_type=chassis, product=product, cpu_model=cpu_model, sockets=sockets)

        result = host.run(DMIDECODE_MEMORY)
        if result is None:
            why = _not_installed(host)
            return cls._from_udev(host, evidence, common, why) or cls(None, why, evidence=evidence, **common)
        root = _is_root(host)
        stderr = (result.stderr or "").strip()
        denied = "permission denied" in (stderr + result.stdout).lower() or "/dev/mem" in stderr
        if not result.ok or denied:
            evidence[DMIDECODE_LINE] = f"exit status {result.rc}" + (f": {stderr.splitlines()[0]}" if stderr else "")
            if root is True:
                first = stderr.splitlines()[0] if stderr else "no error message"
                if "no such file" in stderr.lower() or "no smbios" in stderr.lower():
                    return cls(None, f"dmidecode finds no SMBIOS tables (usual in containers and some VMs): {first}",
                               evidence=evidence, **common)
                return cls(None, f"dmidecode failed (exit status {result.rc}): {first}", evidence=evidence, **common)
            return cls._from_udev(host, evidence, common, "no root") or cls(None, NEEDS_ROOT, evidence=evidence,
                                                                             **common)
        memory = parse_dmidecode_memory(result.stdout)
        if not memory.recognized:
            head = result.stdout.strip().splitlines()[0][:80] if result.stdout.strip() else "(empty)"
            evidence[DMIDECODE_LINE] = head
            return cls(None, f"dmidecode output is not recognisable (starts with {head!r})", evidence=evidence, **common)
        if not memory.devices:
            evidence[DMIDECODE_LINE] = "no DMI type 17 (Memory Device) entries"
            if root is True:
                return cls(None, "dmidecode lists no memory devices (SMBIOS type 17): usual in VMs and containers",
                           evidence=evidence, **common)
            return cls._from_udev(host, evidence, common, "no root") or cls(None, NEEDS_ROOT, evidence=evidence,
                                                                             **common)
        if not memory.installed:
            evidence[DMIDECODE_LINE] = f"{len(memory.devices)} memory devices, none with a size"
            return cls(None, "dmidecode lists memory slots but no installed module with a size", evidence=evidence,
                       **common)
        modules = tuple(describe_module(d) for d in memory.installed)
        evidence[DMIDECODE_LINE] = summarize_modules(modules)
        return cls(memory, None, modules, evidence=evidence, **common)


@dataclass(frozen=True)
class NumaNode:
    node: int
    cpus: tuple[int, ...] | None       # None: cpulist unreadable; () a memory-only node
    mem_total_kb: int | None
    distances: tuple[int, ...] | None = None


@dataclass(frozen=True)
class NumaFacts:
    nodes: tuple[NumaNode, ...] | None  # None: /sys/devices/system/node is absent
    numa_balancing: int | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)

    @property
    def cpu_nodes(self) -> tuple[NumaNode, ...]:
        return tuple(n for n in self.nodes or () if n.cpus)

    @property
    def memory_only_nodes(self) -> tuple[NumaNode, ...]:
        return tuple(n for n in self.nodes or () if n.cpus == () and (n.mem_total_kb or 0) > 0)

    @classmethod
    def gather(cls, host: "Host") -> "NumaFacts":
        evidence: dict[str, str] = {}
        balancing_raw = host.files.read_value(NUMA_BALANCING)
        balancing = None
        if balancing_raw is not None:
            evidence[NUMA_BALANCING] = balancing_raw
            balancing = whole_text(balancing_raw)
        if not host.files.is_dir(NODE_DIR):
            return cls(None, balancing, evidence)
        for path in (NODE_ONLINE, NODE_HAS_CPU):
            value = host.files.read_value(path)
            if value is not None:
                evidence[path] = value
        nodes: list[NumaNode] = []
        for name in host.files.listdir(NODE_DIR):
            m = re.fullmatch(r"node(\d+)", name)
            if not m:
                continue
            base = f"{NODE_DIR}/{name}"
            cpulist = host.files.read(f"{base}/cpulist")
            cpus: tuple[int, ...] | None = None
            if cpulist is not None:
                evidence[f"{base}/cpulist"] = cpulist.strip()
                try:
                    cpus = tuple(parse_cpu_list(cpulist)) if cpulist.strip() else ()
                except TunehostError:
                    cpus = None
            meminfo = host.files.read(f"{base}/meminfo") or ""
            mem = re.search(r"MemTotal:\s*(\d{1,19})\s*kB", meminfo)
            if mem:
                evidence[f"{base}/meminfo"] = f"MemTotal: {mem.group(1)} kB"
            distance_raw = host.files.read_value(f"{base}/distance")
            distances = None
            if distance_raw:
                try:
                    distances = tuple(int(x) for x in distance_raw.split())
                    evidence[f"{base}/distance"] = distance_raw
                except ValueError:
                    distances = None
            nodes.append(NumaNode(int(m.group(1)), cpus, int(mem.group(1)) if mem else None, distances))
        nodes.sort(key=lambda n: n.node)
        return cls(tuple(nodes) if nodes else None, balancing, evidence)
