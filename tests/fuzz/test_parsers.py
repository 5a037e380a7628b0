"""Every parser in tunehost/parsers takes any text (random, garbage bytes, mutated real captures from
tests/data/corpus) and returns its dataclass: never an exception, never NaN/infinity, never a hang."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.profiles import time_limit
from tests.fuzz.strategies import corpus_texts, files_in, hostile_text, no_nan
from tunehost.parsers import dmidecode, llama_version, lscpu, nvidia_smi, power, sensors, udev_dmi

# parser -> the real captures it is fed mutated (the corpus and fixtures of tests/data)
PARSERS: dict[str, tuple[Callable[[str], Any], list[str]]] = {
    "dmidecode": (dmidecode.parse_dmidecode_memory, corpus_texts("dmidecode")),
    "lscpu": (lscpu.parse_lscpu, corpus_texts("lscpu")),
    "lscpu_table": (lscpu.parse_lscpu_table, corpus_texts("lscpu", "topology")),
    "nvidia_smi_xml": (nvidia_smi.parse_nvidia_smi_xml, [t for t in corpus_texts("nvidia-smi") if "<?xml" in t]),
    "nvidia_smi_text": (nvidia_smi.parse_nvidia_smi_text, [t for t in corpus_texts("nvidia-smi") if "<?xml" not in t]),
    "sensors": (sensors.parse_sensors, corpus_texts("thermal")),
    "ppd_get": (power.parse_ppd_get, ["balanced\n", "performance\n", "power-saver\n"]),
    "ppd_list": (power.parse_ppd_list, corpus_texts("power")),
    "tuned_active": (power.parse_tuned_active, corpus_texts("power")),
    "tlp_status": (power.parse_tlp_status, corpus_texts("cpufreq")),
    "tlp_conf": (power.parse_tlp_conf, corpus_texts("cpufreq")),
    "is_active": (lambda text: power.parse_is_active(text, ("tuned.service", "power-profiles-daemon.service")),
                  ["active\ninactive\n", "failed\nactive\n"]),
    "udev_dmi": (udev_dmi.parse_udev_dmi_memory, files_in("udev_dmi")),
    "llama_version": (llama_version.parse_llama_version, files_in("../system/data")),
    "llama_list_devices": (llama_version.parse_list_devices, files_in("../system/data")),
    # the field helpers the parsers share
    "size_mb": (dmidecode.parse_size_mb, ["16 GB", "16384 MB", "No Module Installed", "2 TB"]),
    "speed_mts": (dmidecode.parse_speed_mts, ["4800 MT/s", "3200 MHz", "Unknown"]),
    "nvsmi_num": (nvidia_smi.num, ["12.5 W", "N/A", "[Not Supported]", "81 %"]),
    "nvsmi_integer": (nvidia_smi.integer, ["24576 MiB", "N/A"]),
    "nvsmi_enabled": (nvidia_smi.enabled, ["Enabled", "Disabled", "N/A"]),
    "nvsmi_bus_id": (nvidia_smi.normalise_bus_id, ["00000000:01:00.0", "0000:41:00.0"]),
    "nvsmi_process": (nvidia_smi.process_base_name, ["/usr/bin/llama-server", "C:\\x\\y.exe", "[Not Found]"]),
    "cuda_arch": (llama_version.cuda_architecture, ["8.6", "12.0", "9.0a"]),
}


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parser_takes_any_text(name: str) -> None:
    parse, real = PARSERS[name]

    @given(hostile_text(real))
    def run(text: str) -> None:
        with time_limit(f"parser {name}"):
            result = parse(text)
        no_nan(result, name)

    run()


@given(st.one_of(st.none(), st.integers(min_value=-(1 << 70), max_value=1 << 70)))
def test_number_helpers_take_any_integer(value: int | None) -> None:
    with time_limit("parser int helpers"):
        nvidia_smi.decode_clock_reasons(value)
        llama_version.build_date(value)


@given(st.lists(hostile_text(), max_size=8))
def test_backends_from_any_library_names(names: list[str]) -> None:
    with time_limit("parser backends_from_libs"):
        llama_version.backends_from_libs(names)
