"""Turning real corpus outputs into snapshot files (host path -> content), and realistic sysfs builders.

- `grep_h_files`: the corpus' `grep -H . <file>` sysfs listings ("path:value") -> the files themselves.
- `tlp_stat_files`: `tlp-stat -p` prints "sysfs path = value [unit]"; its "CPU model = ..." line becomes the model name
  of /proc/cpuinfo. TLP shows cpu0 only ("cpu1..cpu3: omitted for clarity"), so the snapshot holds cpu0 only.
- `lscpu_topology_files`: `lscpu -e` / `lscpu -p` rows -> topology/thread_siblings_list, core_id,
  physical_package_id and cache/index3/{id,shared_cpu_list} (lscpu's own ids), plus the online list.
- `meminfo_text`: a full /proc/meminfo in the real field order of the corpus' HP EliteBook file
  (thp_swap/proc-meminfo-hp-elitebook-i7-1370p.txt) with the headline values replaced.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from tunehost.cpulist import format_cpu_list
from tunehost.parsers.lscpu import LscpuCpu

from tests.conftest import corpus

CPU = "/sys/devices/system/cpu"


def grep_h_files(text: str) -> dict[str, str]:
    files = {}
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if sep and path.startswith("/"):
            files[path] = value + "\n"
    return files


def tlp_stat_files(text: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            continue
        if key == "CPU model":
            files["/proc/cpuinfo"] = f"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: {value}\n\n"
            continue
        if not key.startswith("/") or value.startswith("(not available)"):
            continue
        value = re.sub(r"\s*\[[^\]]*\]$", "", value)  # "800000 [kHz]" -> "800000", "13 [%]" -> "13"
        files[key] = value + "\n"
    return files


def lscpu_topology_files(rows: Iterable[LscpuCpu]) -> dict[str, str]:
    rows = list(rows)
    files = {f"{CPU}/online": format_cpu_list(r.cpu for r in rows if r.online is not False) + "\n"}
    by_core: dict[tuple, list[int]] = {}
    by_l3: dict[tuple, list[int]] = {}
    for r in rows:
        by_core.setdefault((r.socket, r.core), []).append(r.cpu)
        if r.l3 is not None:
            by_l3.setdefault((r.socket, r.l3), []).append(r.cpu)
    for r in rows:
        base = f"{CPU}/cpu{r.cpu}"
        files[f"{base}/topology/thread_siblings_list"] = format_cpu_list(by_core[(r.socket, r.core)]) + "\n"
        if r.core is not None:
            files[f"{base}/topology/core_id"] = f"{r.core}\n"
        if r.socket is not None:
            files[f"{base}/topology/physical_package_id"] = f"{r.socket}\n"
        if r.l3 is not None:
            files[f"{base}/cache/index3/id"] = f"{r.l3}\n"
            files[f"{base}/cache/index3/shared_cpu_list"] = format_cpu_list(by_l3[(r.socket, r.l3)]) + "\n"
        if r.max_mhz:
            files[f"{base}/cpufreq/cpuinfo_max_freq"] = f"{int(r.max_mhz * 1000)}\n"
    return files


def meminfo_text(values: Mapping[str, int]) -> str:
    """The corpus EliteBook /proc/meminfo with `values` (kB) replacing its fields, same layout."""
    out = []
    for line in corpus("thp_swap/proc-meminfo-hp-elitebook-i7-1370p.txt").splitlines():
        key, _, rest = line.partition(":")
        if key in values:
            unit = " kB" if rest.strip().endswith("kB") else ""
            number = f"{values[key]}{unit}"
            line = f"{key}:{number.rjust(len(rest))}" if len(number) < len(rest) else f"{key}: {number}"
        out.append(line)
    return "\n".join(out) + "\n"


def top_header_meminfo(text: str) -> str:
    """`top`'s "MiB Mem"/"MiB Swap" header lines -> the /proc/meminfo fields they carry (kB)."""
    mem = re.search(r"MiB Mem :\s*([\d.]+) total,\s*([\d.]+) free", text)
    swap = re.search(r"MiB Swap:\s*([\d.]+) total,\s*([\d.]+) free,\s*([\d.]+) used\.\s*([\d.]+) avail", text)
    assert mem and swap, "not a top header"
    kb = lambda mib: int(float(mib) * 1024)  # noqa: E731
    return (f"MemTotal:       {kb(mem.group(1))} kB\nMemFree:        {kb(mem.group(2))} kB\n"
            f"MemAvailable:   {kb(swap.group(4))} kB\nSwapTotal:      {kb(swap.group(1))} kB\n"
            f"SwapFree:       {kb(swap.group(2))} kB\n")


def swaps_block(text: str) -> str:
    """The `cat /proc/swaps` output inside a pasted terminal session (prompt lines dropped)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Filename"))
    block = []
    for line in lines[start:]:
        if not line.strip() or line.startswith("HOST $"):
            break
        block.append(line)
    return "\n".join(block) + "\n"
