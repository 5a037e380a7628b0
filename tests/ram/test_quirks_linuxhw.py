"""Each dmidecode quirk ram-speed handles, on a real linuxhw/DMI dump (tests/data/linuxhw_dmi, README there; the two
in quirks/ were picked from the same commit by what they show, the others come from the seeded sample)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import DATA

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from ram_corpus import judge_text  # noqa: E402

SAMPLE = DATA / "linuxhw_dmi"


def judge(name: str):
    findings = judge_text((SAMPLE / name).read_text())
    return [f.severity.value for f in findings], [f.summary for f in findings]


def test_out_of_spec_type_is_ddr5_and_xmp_off_fails():
    # dmidecode < 3.3 prints "Type: <OUT OF SPEC>" for DDR5: Kingston FURY KF560C32 (DDR5-6000) at 4800 on AM5
    sev, [speed] = judge("quirks/Desktop__ASUSTek_Computer__PRIME__PRIME_B650-PLUS__0CFF401B1669.txt")
    assert sev == ["fail"] and speed.startswith("XMP/EXPO is off: DDR5 runs at 4800") and "KF560C32-16" in speed


def test_xeon_e5_v4_on_x99_is_cpu_limited_not_xmp_off():
    sev, [speed, channels] = judge("quirks/Desktop__MACHINIST__X99-D8-MAX__X99-D8-MAX_V1.0__05392AD3DE5C.txt")
    assert sev == ["info", "warn"] and "CPU/platform-limited" in speed and "DDR4-2400" in speed and "E5-2696 v4" in speed
    # two DIMMs on a quad-channel Xeon E5 v4 (the CPU data knows its 4 channels; the board names only 2)
    assert "2 of 4 memory channels populated" in channels


def test_intel_h310_chipset_allows_no_xmp():
    sev, summaries = judge("quirks/Desktop__Gigabyte_Technology__H310__H310MS2P__5BF2628185FA.txt")
    assert sev == ["info", "fail"] and "H310 chipset" in summaries[0] and "DDR4-2400" in summaries[0]


def test_am3_firmware_reports_the_clock_in_both_fields():
    # Speed 800 / Configured 800 on a DDR3-1600 kit (AMD Radeon R5S38G1601U2S): MHz, not MT/s
    sev, [speed] = judge("quirks/Desktop__Gigabyte_Technology__970__970A-DS3__E9562EEF7198.txt")
    assert sev == ["ok"] and "DDR3 at 1600" in speed and "clock (MHz) in both" in speed


def test_agesa_half_rate_configured_with_rounding():
    # Speed 2133, Configured 1067 (not exactly half: 2133 / 2 rounded up)
    sev, [speed] = judge("quirks/Desktop__MSI__MS-7__MS-7A34__55B1D43ACACD.txt")
    assert sev == ["ok"] and "DDR4 at 2133" in speed and "units quirk" in speed


def test_firmware_rounding_2999_is_3000():
    sev, [speed] = judge("quirks/Desktop__ASRock__Z390__Z390_Pro4__46A4A6A4C823.txt")
    assert sev == ["ok"] and "3000" in speed


def test_garbage_configured_speed_is_not_used():
    # "Configured Memory Speed: 29561 MT/s" on one DIMM, Unknown on the other: no configured speed. The E1-1200 nettop
    # has SODIMMs and no XMP, so the ratings (1066 and 1333) and the CPU's DDR3-1333 settle it (issue 34)
    sev, [speed] = judge("quirks/Desktop__Hewlett-Packard__CQ2900__CQ2900EF__DBE77F8AC224.txt")
    assert sev == ["info"] and "29561" not in speed
    assert "1066 and 1333" in speed and "configured speed is not reported" in speed


def test_soldered_lpddr4_row_of_chips_is_info_not_xmp():
    sev, [speed] = judge("quirks/Desktop__AMI__Intel__Intel__83D5E1D6ADD8.txt")
    assert sev == ["info"] and speed.startswith("Soldered LPDDR4") and "XMP/EXPO is off" not in speed


def test_mixed_kits_name_the_module_that_holds_the_others_back():
    sev, [speed] = judge("quirks/Desktop__Gigabyte_Technology__Z390__Z390_AORUS_PRO__6E59E939571D.txt")
    assert sev == ["info"] and "3000 and 3200" in speed and "CMK16GX4M2B3000C15, holds the others back" in speed


def test_board_reports_the_xmp_rate_in_speed():
    sev, [speed] = judge("quirks/Desktop__ASRock__B550__B550_Steel_Legend__EA9EEB0DD2EC.txt")
    assert sev == ["ok"] and "3600" in speed and "XMP/EXPO on" in speed


def test_rated_kit_vendor_without_part_number_is_rating_unknown_and_channels_still_judged():
    # G.Skill (JEDEC id 0420) without a part number at 2133; DIMM_A1 + DIMM_A2 = both on channel A. The rating is
    # unknown, but a Skylake CPU on an H170 board (no memory overclocking) runs nothing faster than DDR4-2133
    sev, summaries = judge("quirks/Desktop__ASUSTek_Computer__H170__H170M-PLUS__4A1640D5B7AD.txt")
    assert sev == ["ok", "fail"] and "fastest this memory controller runs it" in summaries[0]
    assert "H170" in summaries[0] and "not reported" in summaries[0]
    assert "one channel" in summaries[1]


def test_odd_locators_channels():
    # X99: "DIMM_B1" / "NODE 1": one DIMM of a quad-channel board; Threadripper PRO: 6 of 8 "P0 CHANNEL x"
    sev, summaries = judge("quirks/Desktop__Gigabyte_Technology__X99__X99-UD3-CF__2276EA2BD40D.txt")
    assert sev[1] == "fail" and "the CPU has 4 channels — 1/4 of the memory bandwidth" in summaries[1]
    sev, summaries = judge("quirks/Desktop__ASUSTek_Computer__Pro__Pro_WS_WRX80E-SAGE_SE_WIFI__B63E19C47856.txt")
    assert sev == ["ok", "warn"] and "6 of 8 memory channels" in summaries[1]
