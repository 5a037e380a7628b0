"""The /proc and sysfs file parsers of the facts layer take any text: a result or None (unknown), never an exception,
never a negative count, never a CPU number the kernel cannot have, and never a hang on a huge range."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.profiles import time_limit
from tests.fuzz.strategies import HOSTILE_NUMBERS, corpus_texts, hostile_text, no_nan
from tunehost import bounds
from tunehost.cpulist import MAX_CPUS, format_cpu_list, parse_cpu_list
from tunehost.errors import TunehostError
from tunehost.facts import clocks, cpu, drm_clients, gpu, memory, topology
from tunehost.host import samples

MEMINFO_REAL = [t for t in corpus_texts("thp_swap") if "MemTotal" in t]
SWAPS_REAL = ["Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 8388604 1024 100\n/swap.img file 2097148 0 -2\n"]
VMSTAT_REAL = ["nr_free_pages 123456\npswpin 17\npswpout 4\npgmajfault 99\n"]
FDINFO_REAL = [(p.read_text()) for p in sorted((corpus_texts.__globals__["DATA"] / "gpu" / "drm").glob("*.txt"))]

# parser -> (function, real examples); each returns a value or None for text it cannot read
FILE_PARSERS: dict[str, tuple[Callable[[str], Any], list[str]]] = {
    "meminfo": (memory.parse_meminfo, MEMINFO_REAL),
    "swaps": (memory.parse_swaps, SWAPS_REAL),
    "mm_stat": (memory.parse_mm_stat, ["4096 1024 2048 0 2048 0 0 0 0\n"]),
    "selector": (memory.selected_mode, ["always [madvise] never\n"]),
    "selector_options": (memory.selector_options, ["[always] madvise never\n"]),
    "vmstat": (samples.parse_vmstat, VMSTAT_REAL),
    "cpufreq_int": (cpu._to_int, ["3400000\n"]),
    "cache_size": (topology._size_kb, ["32768K\n", "36M\n"]),
    "cppc_feedback": (clocks.parse_feedback, ["ref:342156 del:279001\n"]),
    "drm_fdinfo": (drm_clients.parse_fdinfo, FDINFO_REAL),
    "pp_dpm_pcie": (gpu.parse_pp_dpm_pcie, ["0: 2.5GT/s, x8 \n1: 16.0GT/s, x16 *\n"]),
    "cpuinfo_identity": (cpu._cpuinfo_identity, ["vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n"]),
}


def _no_negative_counts(value: Any, name: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, int) and name in ("meminfo", "vmstat"):
                assert v >= 0, f"{name}[{k!r}] = {v}"
    if name == "swaps":
        for area in value:
            assert area.size_kb >= 0 and area.used_kb >= 0


@pytest.mark.parametrize("name", sorted(FILE_PARSERS))
def test_file_parser_takes_any_text(name: str) -> None:
    parse, real = FILE_PARSERS[name]

    @given(hostile_text(real))
    def run(text: str) -> None:
        with time_limit(f"sysfs {name}"):
            result = parse(text)
        no_nan(result, name)
        _no_negative_counts(result, name)

    run()


cpu_list_parts = st.one_of(
    st.integers(0, MAX_CPUS + 10).map(str),
    st.tuples(st.integers(0, 10**9), st.integers(0, 10**9)).map(lambda r: f"{r[0]}-{r[1]}"),
    st.sampled_from(HOSTILE_NUMBERS + ["0-999999", "0-100000000", "", "-", "3-1", " 1 - 2 "]),
)


@given(st.one_of(st.lists(cpu_list_parts, min_size=1, max_size=6).map(",".join), hostile_text()))
def test_cpu_list_is_bounded(text: str) -> None:
    """A CPU list parses to CPU numbers the kernel can have, or is one clear TunehostError — quickly."""
    with time_limit("sysfs cpu list"):
        try:
            cpus = parse_cpu_list(text)
        except TunehostError as exc:
            assert "\n" not in str(exc) and "\x1b" not in str(exc)
            return
    assert cpus == sorted(set(cpus)) and all(0 <= c < MAX_CPUS for c in cpus)
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(), st.text(max_size=30),
                 st.sampled_from(HOSTILE_NUMBERS)))
def test_bounds_helpers_give_a_plausible_value_or_none(value: Any) -> None:
    with time_limit("sysfs bounds"):
        got = [bounds.whole(value), bounds.number(value), bounds.whole_text(value if isinstance(value, str) else None),
               bounds.number_text(value if isinstance(value, str) else None)]
    for result in got:
        assert result is None or (0 <= result <= bounds.MAX_COUNT or result == float(result))
        no_nan(result)
    assert got[0] is None or not isinstance(value, bool)
