"""The CPU memory-controller data (tunehost/data/cpu_memory.csv) and how ram-speed uses it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from tunehost.facts.cpu_memory import cpu_memory, normalize, table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from ram_corpus import judge_text  # noqa: E402


@pytest.mark.parametrize("model, expected", [
    ("12th Gen Intel(R) Core(TM) i5-1235U", "Intel Core i5-1235U"),
    ("AMD Ryzen 7 5800U with Radeon Graphics", "AMD Ryzen 7 5800U"),
    ("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", "Intel Xeon E5-2680 v4"),
    ("AMD EPYC 7313P 16-Core Processor", "AMD EPYC 7313P"),
    ("AMD Ryzen AI 9 HX 370 w/ Radeon 890M", "AMD Ryzen AI 9 HX 370"),
    ("Intel(R) Celeron(R) CPU  N2830  @ 2.16GHz", "Intel Celeron N2830"),
])
def test_normalize_reads_dmidecode_and_cpuinfo_alike(model, expected):
    assert normalize(model) == expected


@pytest.mark.parametrize("model, mem_type, mts, channels, segment", [
    ("AMD Ryzen 7 5800U with Radeon Graphics", "DDR4", 3200, 2, "mobile"),
    ("AMD Ryzen 7 5800U with Radeon Graphics", "LPDDR4", 4266, 2, "mobile"),       # LPDDR4 -> the LPDDR4X row
    ("Intel(R) Core(TM) Ultra 7 155H", "LPDDR5", 7467, 2, "mobile"),               # LPDDR5 -> LPDDR5X
    ("13th Gen Intel(R) Core(TM) i7-13620H", "DDR5", 5200, 2, "mobile"),
    ("Intel(R) N100", "DDR5", 4800, 1, "embedded"),
    ("Intel(R) Celeron(R) N4100 CPU @ 1.10GHz", "DDR4", 2400, 2, "embedded"),
    ("Intel(R) Celeron(R) CPU  N2830  @ 2.16GHz", "DDR3", 1333, 2, "embedded"),    # DDR3 -> the DDR3L row; ARK: 2 channels
    ("Intel(R) Core(TM) i5-8250U CPU @ 1.60GHz", "DDR4", 2400, 2, "mobile"),
    ("Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", "DDR4", 2933, 2, "desktop"),
    ("Intel(R) Core(TM) i5-10400 CPU @ 2.90GHz", "DDR4", 2666, 2, "desktop"),
    ("AMD Ryzen 5 3600 6-Core Processor", "DDR4", 3200, 2, "desktop"),
    ("AMD Ryzen 5 2400GE with Radeon Vega Graphics", "DDR4", 2933, 2, "desktop"),
    ("Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", "DDR4", 2400, 6, "server"),
    ("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "DDR4", 3200, 8, "server"),
    ("Intel(R) Xeon(R) CPU E5-2620 0 @ 2.00GHz", "DDR3", 1333, 4, "server"),
    ("AMD EPYC 9654 96-Core Processor", "DDR5", 4800, 12, "server"),
    ("AMD EPYC 7401P 24-Core Processor", "DDR4", 2666, 8, "server"),
])
def test_known_cpus(model, mem_type, mts, channels, segment):
    cpu = cpu_memory(model)
    assert cpu is not None and cpu.max_for(mem_type)[0] == mts
    assert cpu.channels == channels and cpu.segment == segment


def test_unknown_and_hostile_models():
    for model in (None, "", "Intel(R) Core(TM)2 Duo CPU E8400 @ 3.00GHz", "Not Specified", "x" * 10_000, 42):
        assert cpu_memory(model) is None  # type: ignore[arg-type]
    assert cpu_memory("AMD Ryzen 7 5800U").max_for("DDR5") is None  # a type the controller does not take


def test_every_row_is_reachable_and_sourced():
    rows = table()
    assert len(rows) >= 150
    assert all(cpu.channels >= 1 for _, cpu in rows)
    # every source is a page someone can open, or says plainly that the row has not been checked against one
    sourced = re.compile(r"^(?:Intel ARK: https://ark\.intel\.com/\S+\.html(?: \(13th Gen verified; 14th Gen unverified\))?"
                         r"|AMD: https://www\.amd\.com/en/products/specifications/processors"
                         r"|Intel ARK \(unverified\)|AMD \(unverified\))$")
    assert all(sourced.match(cpu.source) for _, cpu in rows), [cpu.source for _, cpu in rows if not sourced.match(cpu.source)]


def test_reduced_profile_at_the_cpus_official_maximum_is_info():
    # Ryzen 7 5800X3D (DDR4-3200 officially) with a DDR4-3600 kit at 3200: the controller's official limit (info);
    # the same loss above a CPU's official maximum is a reduced profile (warn, tests/checks/test_ram_speed.py)
    text = (DATA / "linuxhw_dmi" / "Desktop__Gigabyte_Technology__X570S__X570S_AORUS_PRO_AX__CDC751872150.txt")
    [speed] = judge_text(text.read_text())
    assert speed.severity.value == "info" and "official maximum (DDR4-3200" in speed.summary


def test_notebook_at_its_cpus_maximum_is_not_below_its_rating():
    # i5-7200U (DDR4-2133) with a DDR4-2400 SO-DIMM at 2133: CPU-limited (info), not "below the rating" (warn)
    text = (DATA / "linuxhw_dmi_mobile" / "All_In_One__Dell__Inspiron__Inspiron_3477_AIO__5AF3734D09AB.txt")
    speed, channels = judge_text(text.read_text(), "All In One/")
    assert speed.severity.value == "info" and "DDR4-2133" in speed.summary
    assert channels.severity.value == "warn" and "Single channel" in channels.summary
    assert "SO-DIMM" in channels.fix.text and "XMP" not in channels.fix.text


def test_unequal_channels_on_a_notebook():
    # 4 GB + 16 GB SO-DIMMs on a Ryzen 7 3700U: 12 of 20 GB are read from one channel
    text = DATA / "linuxhw_dmi_mobile" / ("Notebook__ASUSTek_Computer__VivoBook_ASUSLaptop__VivoBook_ASUSLaptop_"
                                          "X509DA_M509DA__FD1964527BD4.txt")
    speed, channels = judge_text(text.read_text(), "Notebook/")
    assert speed.severity.value == "info" and "DDR4-2400" in speed.summary
    assert channels.severity.value == "warn"
    assert "Unequal channels (4 GB + 16 GB): 12 GB of 20 GB (60 %)" in channels.summary
    assert "matched pair" in channels.fix.text and "XMP" not in channels.fix.text


def test_server_population_per_socket_is_one_finding():
    # HPE DL160 Gen8: 12 RDIMMs on PROC 1 (3 per channel), none on PROC 2
    text = DATA / "linuxhw_dmi_mobile" / "Server__Hewlett-Packard__ProLiant__ProLiant_DL160_Gen8__229473840979.txt"
    speed, channels = judge_text(text.read_text(), "Server/")
    assert speed.severity.value == "info" and "3 DIMMs per channel" in speed.summary
    assert channels.severity.value == "warn" and "socket 2: no memory" in channels.summary
    assert "RDIMM in every channel of every socket (4 per CPU" in channels.fix.text
