"""The `dmidecode -t memory` parser on the real corpus files (tests/data/corpus/dmidecode/, see SOURCES.md) and on
the quirks and garbage real machines produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORPUS, corpus
from tunehost.parsers.dmidecode import parse_dmidecode_memory, parse_size_mb, parse_speed_mts

DMIDECODE_FILES = sorted((CORPUS / "dmidecode").glob("*.txt"))


@pytest.mark.parametrize("path", DMIDECODE_FILES, ids=[p.stem for p in DMIDECODE_FILES])
def test_every_corpus_file_parses(path: Path):
    mem = parse_dmidecode_memory(path.read_text())
    assert mem.recognized and mem.arrays and mem.installed
    for dev in mem.installed:
        assert dev.size_mb and dev.type and dev.configured_mts and dev.part_number == dev.part_number.strip()


def test_array_fields_on_server_with_ecc():
    mem = parse_dmidecode_memory(corpus("dmidecode/ddr4-rdimm-16dimm-xeon4316-3200-configured-2666.txt"))
    [array] = mem.arrays
    assert array.number_of_devices == 32 and array.ecc and array.maximum_capacity == "12 TB"
    assert len(mem.devices) == 32 and len(mem.installed) == 16
    assert all(d.registered for d in mem.installed) and mem.installed[0].total_width == 72


def test_empty_slot_no_module_installed():
    mem = parse_dmidecode_memory(corpus("dmidecode/ddr5-6000-kit-2dimm-am5-7700x-configured-3600-below-jedec.txt"))
    empty = [d for d in mem.devices if not d.installed]
    assert len(empty) == 2 and all(d.size_mb is None and d.type is None for d in empty)
    assert {d.bank_locator for d in empty} == {"P0 CHANNEL A"}


def test_sizes_in_mb_on_old_dmidecode_3_2():
    mem = parse_dmidecode_memory(corpus("dmidecode/ddr4-3200-kit-ryzen2600-configured-1600-half-rate-quirk.txt"))
    assert mem.version == "3.2"
    assert [d.size_mb for d in mem.installed] == [8192, 8192]


def test_part_number_trailing_blanks_are_stripped():
    mem = parse_dmidecode_memory(corpus("dmidecode/ddr5-6000-kit-am5-7950x3d-expo-off-speed-eq-configured-4800.txt"))
    assert {d.part_number for d in mem.installed} == {"F5-6000J3238F16G"}


def test_bogus_speed_12800_is_parsed_as_reported():
    mem = parse_dmidecode_memory(corpus("dmidecode/ddr5-5600-kit-z790-bogus-speed-12800-configured-5600.txt"))
    assert {(d.speed_mts, d.configured_mts) for d in mem.installed} == {(12800, 5600)}


def test_lpddr5x_reported_as_lpddr5_row_of_chips():
    mem = parse_dmidecode_memory(corpus("dmidecode/lpddr5-6400-laptop-core-ultra7-155h.txt"))
    assert len(mem.installed) == 8 and all(d.soldered and d.type == "LPDDR5" for d in mem.installed)
    assert sum(d.data_width or 0 for d in mem.installed) == 128


def test_lpddr5x_form_factor_other_is_soldered():
    mem = parse_dmidecode_memory(corpus("dmidecode/lpddr5x-7500-laptop-ryzen-ai9-365.txt"))
    assert all(d.form_factor == "Other" and d.soldered for d in mem.installed)


def test_old_configured_clock_speed_name_and_mhz_units():
    # dmidecode < 3.0 says "Configured Clock Speed" and "MHz"; the number is the data rate either way
    text = corpus("dmidecode/ddr4-3600-kit-ryzen3600-xmp-off-2133.txt")
    old = text.replace("Configured Memory Speed", "Configured Clock Speed").replace("MT/s", "MHz")
    mem = parse_dmidecode_memory(old)
    assert {(d.speed_mts, d.configured_mts) for d in mem.installed} == {(2133, 2133)}


@pytest.mark.parametrize("raw, mb", [("16 GB", 16384), ("8192 MB", 8192), ("1 TB", 1048576), ("No Module Installed", None),
                                     ("Not Installed", None), ("Unknown", None), ("garbage", None), ("0 MB", None),
                                     ("", None), (None, None), ("12 XB", None)])
def test_parse_size(raw, mb):
    assert parse_size_mb(raw) == mb


@pytest.mark.parametrize("raw, mts", [("3200 MT/s", 3200), ("2133 MHz", 2133), ("Unknown", None), ("fast", None),
                                      ("0 MT/s", None), ("4800", 4800), ("3.2 GT/s", None), (None, None)])
def test_parse_speed(raw, mts):
    assert parse_speed_mts(raw) == mts


@pytest.mark.parametrize("text", ["", "garbage\n\x00\xff", "Handle 0x0001, DMI type 17, 92 bytes\n", "{json: 1}",
                                  "Handle 0xZZ, DMI type x\n\tSize: 16 GB", "\t\tSize: 4 GB\n" * 3, None, 42])
def test_garbage_never_raises(text):
    mem = parse_dmidecode_memory(text)  # type: ignore[arg-type]
    assert not mem.installed


def test_header_only_output_of_a_non_root_run():
    # what dmidecode prints on stdout when /sys/firmware/dmi/tables is root-only
    mem = parse_dmidecode_memory("# dmidecode 3.3\n")
    assert mem.recognized and not mem.devices and mem.version == "3.3"


def test_truncated_device_block_is_an_empty_slot():
    mem = parse_dmidecode_memory("# dmidecode 3.5\nHandle 0x0014, DMI type 17, 92 bytes\nMemory Device\n\tSize: 16")
    [dev] = mem.devices
    assert not dev.installed  # a size without a unit is not a size
