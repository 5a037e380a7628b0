"""Parsers for util-linux `lscpu` output: the summary (`lscpu`, flat or the >= 2.38 indented layout), the extended
table (`lscpu -e`) and the parsable CSV (`lscpu -p`). Pure `str -> dataclass` functions: garbage gives empty results.

tunehost reads topology from sysfs; these parsers turn lscpu outputs users paste (bug reports, the corpus) into the
same per-CPU facts, e.g. to build snapshot fixtures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tunehost.bounds import number_text

MAX_MHZ = 100_000.0  # no CPU clock comes near 100 GHz


@dataclass(frozen=True)
class LscpuSummary:
    fields: dict[str, str] = field(default_factory=dict)  # "Model name" -> "AMD EPYC 7451 24-Core Processor"

    def get(self, key: str) -> str | None:
        return self.fields.get(key)

    def int(self, key: str) -> int | None:
        match = re.match(r"\s*([0-9]+)", self.fields.get(key) or "")
        return int(match.group(1)) if match else None

    @property
    def cpus(self) -> int | None:
        return self.int("CPU(s)")

    @property
    def threads_per_core(self) -> int | None:
        return self.int("Thread(s) per core")

    @property
    def cores_per_socket(self) -> int | None:
        return self.int("Core(s) per socket")

    @property
    def sockets(self) -> int | None:
        return self.int("Socket(s)")

    @property
    def model_name(self) -> str | None:
        return self.fields.get("Model name")

    @property
    def vendor(self) -> str | None:
        return self.fields.get("Vendor ID")

    @property
    def max_mhz(self) -> float | None:
        return _float(self.fields.get("CPU max MHz"))

    @property
    def l3_instances(self) -> int | None:
        """"128 MiB (16 instances)" -> 16 (both the flat "L3 cache:" and the indented "L3:" keys)."""
        text = self.fields.get("L3 cache") or self.fields.get("L3") or ""
        match = re.search(r"\(([0-9]+) instances?\)", text)
        return int(match.group(1)) if match else None


def parse_lscpu(text: str | None) -> LscpuSummary:
    """`lscpu` -> its "Key: value" fields (indentation ignored, wrapped continuation lines dropped)."""
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        if line.startswith("#"):
            break  # a following `lscpu -p` block
        match = re.match(r"^\s*([A-Za-z0-9][^:]{0,60}?):\s*(.*?)\s*$", line)
        if match and match.group(1) not in fields:
            fields[match.group(1).strip()] = match.group(2)
    return LscpuSummary(fields)


@dataclass(frozen=True)
class LscpuCpu:
    """One logical CPU of `lscpu -e` or `lscpu -p`. Cache ids are lscpu's own numbering."""

    cpu: int
    core: int | None = None
    socket: int | None = None
    node: int | None = None
    l2: int | None = None
    l3: int | None = None
    online: bool | None = None
    max_mhz: float | None = None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "", "-") else None  # type: ignore[arg-type]
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    # a clock in MHz: "nan", "inf", "-" or an absurd figure is no reading
    return number_text(value, 0.0, MAX_MHZ) if value not in (None, "", "-") else None


def parse_lscpu_table(text: str | None) -> list[LscpuCpu]:
    """`lscpu -e` (header "CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE ...") or `lscpu -p` (comment header
    "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3") -> one row per CPU, first table only when several are pasted."""
    rows: list[LscpuCpu] = []
    seen: set[int] = set()
    lines = (text or "").splitlines()
    csv_header: list[str] | None = None
    table_header: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("# CPU,") or stripped.startswith("#CPU,"):
            if rows:
                break
            csv_header = [h.strip().lower() for h in stripped.lstrip("#").split(",")]
            continue
        if re.match(r"^CPU\s+", stripped) and table_header is None and csv_header is None:
            table_header = stripped.split()
            continue
        if csv_header is not None and stripped and not stripped.startswith("#"):
            values = stripped.split(",")
            if len(values) != len(csv_header):
                continue
            row = dict(zip(csv_header, values))
            cpu = _int(row.get("cpu"))
            if cpu is None or cpu in seen:
                continue
            seen.add(cpu)
            rows.append(LscpuCpu(cpu, _int(row.get("core")), _int(row.get("socket")), _int(row.get("node")),
                                 _int(row.get("l2")), _int(row.get("l3"))))
        elif table_header is not None and stripped:
            values = stripped.split()
            if len(values) != len(table_header):
                continue
            row = dict(zip(table_header, values))
            cpu = _int(row.get("CPU"))
            if cpu is None or cpu in seen:
                continue
            caches: dict[str, str] = {}
            for key, value in row.items():
                if ":" in key:  # "L1d:L1i:L2:L3" -> "0:0:0:0"
                    caches.update(zip(key.split(":"), value.split(":")))
            seen.add(cpu)
            online = row.get("ONLINE")
            rows.append(LscpuCpu(cpu, _int(row.get("CORE")), _int(row.get("SOCKET")), _int(row.get("NODE")),
                                 _int(caches.get("L2")), _int(caches.get("L3")),
                                 None if online is None else online == "yes", _float(row.get("MAXMHZ"))))
    return rows
