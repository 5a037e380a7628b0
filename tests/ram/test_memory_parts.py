"""Part number -> rated speed. The corpus part numbers (tests/data/corpus/dmidecode/, see SOURCES.md) first, then
each vendor's documented naming scheme, then parts that must stay unknown (never a guess)."""

from __future__ import annotations

import pytest

from tunehost.facts.memory_parts import cpu_memory_limit, is_standard_grade, rated_speed, snap_grade

CORPUS_PARTS = [
    ("F4-3600C18-8GVK", 3600, True), ("F4-3600C16-16GVKC", 3600, True), ("F4-3200C14-8GFX", 3200, True),
    ("F5-6000J3238F16G", 6000, True), ("F5-6000J3038F16G", 6000, True), ("F5-6000J3040F16G", 6000, True),
    ("F5-6000J3636F16G", 6000, True), ("CMH32GX5M2B5600Z36", 5600, True), ("CMK64GX5M2B5600C40", 5600, True),
    ("36ASF8G72PZ-3G2E1", 3200, False), ("M321R8GA0BB0-CQKZJ", 4800, False), ("MT62F2G32D4DS-026 WT", 7500, False),
    ("MT62F2G32D4DS-026", 7500, False), ("UD5-8000", 8000, True),
]
VENDOR_SCHEMES = [
    ("CMK32GX4M2B3200C16", 3200, True), ("CMT32GX5M2X6000C36", 6000, True), ("CMSX16GX4M2A2666C18", 2666, True),
    ("CMK32GX5M2A4800C40", 4800, False),
    ("KF560C30-16", 6000, True), ("KF436C18BB/16", 3600, True), ("HX432C16FB3/8", 3200, True),
    ("HX426C16FB3/16", 2666, True), ("HX318C10F/8", 1866, True), ("KVR32N22S8/8", 3200, False),
    ("KVR48U40BS8-16", 4800, False), ("KSM32RD4/32HDR", 3200, False), ("KCP432NS8/8", 3200, False),
    ("BL2K16G36C16U4B", 3600, True), ("BLM2K8G44C19U4B", 4400, True), ("BLS16G4D32AESB", 3200, True),
    ("CT16G4DFRA32A", 3200, False), ("CT8G4SFRA266", 2666, False), ("CT16G4SFD832A", 3200, False),
    ("CT4G4DFS8213", 2133, False), ("CP16G4DFRA32A", 3200, False), ("CT16G48C40U5", 4800, False),
    ("CT32G56C46S5", 5600, False), ("CP2K16G60C36U5B", 6000, True),
    ("TF3D416G3600HC18JDC01", 3600, True), ("TLZGD416G3200HC16FDC01", 3200, True), ("FF3D516G6000HC38A", 6000, True),
    ("TED416G3200C2201", 3200, False), ("TED516G5600C4601", 5600, False),
    ("PVS416G360C8", 3600, True), ("PV416G320C6", 3200, True), ("PVV532G620C40K", 6200, True),
    ("PSD48G266681", 2666, False),
    ("AX5U6000C3016G-DCLARBK", 6000, True), ("AX4U360038G18", 3600, True), ("AD4U32008G22-SGN", 3200, False),
    ("M378A2G43CB3-CWE", 3200, False), ("M471A1K43DB1-CWE", 3200, False), ("M425R2GA3BB0-CWMOD", 5600, False),
    ("HMA81GU6CJR8N-VK", 2666, False), ("HMAA4GR7AJR8N-XN", 3200, False), ("18ASF2G72PZ-2G6E1", 2666, False),
    ("MTC20F2085S1RC48BA1", 4800, False),
]


@pytest.mark.parametrize("part, speed, profile", CORPUS_PARTS + VENDOR_SCHEMES)
def test_rated_speed(part, speed, profile):
    rating = rated_speed(part)
    assert rating is not None, part
    assert (rating.speed_mts, rating.profile) == (speed, profile)
    assert str(speed) in rating.describe()


@pytest.mark.parametrize("part", [
    "9905783-482.A00G",      # Kingston OEM module number: no rating in it
    "HMCG78AGBSA095N",       # SK hynix DDR5: no speed code we could verify; the Speed field is used
    "HMCG78AGBUA084N", "GD2.3831WM.003", "H58G66AK6BX070", "Unknown", "", None, "F5-99999", "CMXXXX",
])
def test_unknown_parts_stay_unknown(part):
    assert rated_speed(part) is None


@pytest.mark.parametrize("mts, ok", [(3200, True), (2133, True), (2666, True), (2667, True), (7467, True), (8533, True),
                                     (12800, False), (1600, True), (0, False), (None, False), (3217, False), (700, False)])
def test_is_standard_grade(mts, ok):
    assert is_standard_grade(mts) is ok


def test_snap_grade():
    assert snap_grade(2660) == 2666 and snap_grade(3600) == 3600 and snap_grade(1866) == 1866


def test_cpu_memory_limit_xeon_silver_4316():
    assert cpu_memory_limit("Intel(R) Xeon(R) Silver 4316 CPU @ 2.30GHz") == (2666, "DDR4-2666")
    assert cpu_memory_limit("AMD EPYC 9654 96-Core Processor") == (4800, "DDR5-4800")
    assert cpu_memory_limit("AMD Ryzen 9 7950X 16-Core Processor") is None  # EXPO runs above its official 5200
    assert cpu_memory_limit(None) is None


# real part numbers from linuxhw/DMI desktop dumps (commit 57b21bc6, see tests/data/linuxhw_dmi/README.md), one or
# more per vendor rule of tunehost/facts/memory_parts.py
LINUXHW_PARTS = [
    ("KHX3200C16D4/8GX", 3200, True), ("KHX2666C16/8G", 2666, True), ("KHX1600C9D3/4GX", 1600, True),
    ("KF3200C16D4/16GX", 3200, True), ("KF560C36-16", 6000, True), ("560C36-16", 6000, True),
    ("KF556R36-32", 5600, True), ("TEAMGROUP-UD4-3200", 3200, True), ("TEAMGROUP-UD3-1600", 1600, True),
    ("TIMETEC-UD4-3600", 3600, True), ("Team-Elite-1600", 1600, False), ("3200 C16 Series", 3200, True),
    ("1600 CL9 Series", 1600, True), ("CL16-18-18 D4-3000", 3000, True), ("R748G2606U2S", 2666, True),
    ("R9S48G3206U2S", 3200, True), ("R744G2133U1S", 2133, False), ("IRX3000D464L16S/8G", 3000, True),
    ("GR2400D464L17S/8G", 2400, False), ("IR-6000D564L30S/16G", 6000, True), ("R009D408GX2-3200C16A", 3200, True),
    ("SP008GXLZU320BSA", 3200, True), ("SP008GBLFU240B02", 2400, False), ("LD4BU016G-3600WG", 3600, True),
    ("LD5EU016G-6400LA", 6400, True), ("NMUD416E82-3601D", 3600, True), ("MD4U1636181C", 3600, True),
    ("D5U1664320I-K91", 6400, True), ("MRX4U320GJJM8G", 3200, True), ("KD48GU880-32A160U", 3200, True),
    ("AR32C16S8K2HU416R", 3200, True), ("GP-ARS16G44", 4400, True), ("TYA4U2666D19082C", 2666, True),
    ("CM4X16GC3000C16K4D", 3000, True), ("CMWX16GC3200C16W2E", 3200, True), ("CMK5X32G2B52C40A2", 5200, True),
    ("BLE8G4D36BEEAK.M8FE1", 3600, True), ("BLS8G3D1609DS1S00.", 1600, True), ("CT4G4DFS6266.C4FJ", 2666, False),
    ("CB8GU2666.C8RT", 2666, False), ("CT51264BA160B.C16F", 1600, False), ("F3-12800CL9-4GBXL", 1600, True),
    ("M378B5773DH0-CH9", 1333, False), ("HMT351U6CFR8C-PB", 1600, False), ("8JTF25664AZ-1G4D1", 1333, False),
    ("RMUA5110ME78HAF-2666", 2666, False), ("JM2666HLB-8G", 2666, False), ("KS3200D4P12008G", 3200, False),
    ("MD16GSD54800-BLK", 4800, False), ("DDR4 16GB 3200MHz", 3200, True), ("AO2P26KC8T1-BXGSHC", 2666, False),
]


@pytest.mark.parametrize("part, speed, profile", LINUXHW_PARTS)
def test_linuxhw_part_numbers(part, speed, profile):
    rating = rated_speed(part)
    assert rating is not None, part
    assert (rating.speed_mts, rating.profile) == (speed, profile)


@pytest.mark.parametrize("part, vendor, jedec", [
    ("9965745-020.A00G", "Kingston", True), ("99U5471-020.A00LF", "Kingston", True), ("HP26D4U9S8ME-8X", "Kingston", True),
    ("MSI24D4U7S8MB-8", "Kingston", True), ("XN205T-MIE2", "Kingston", True),
    ("HMCG88AGBUA081N", "SK hynix", True), ("D12.2324WE.001", "Apacer", True), ("8GBF1X08QFHH38-135-K", "PNY", False),
    ("VMA45UG-MEC1U2AW2", "Asgard", False),
])
def test_families_without_a_rating(part, vendor, jedec):
    from tunehost.facts.memory_parts import module_family
    family = module_family(part)
    assert rated_speed(part) is None and family is not None and (family.vendor, family.jedec) == (vendor, jedec)


@pytest.mark.parametrize("manufacturer, vendor", [
    ("Kingston", "Kingston"), ("029E", "Corsair"), ("04CD", "G.Skill"), ("859B", "Crucial"), ("04EF", "TeamGroup"),
    ("8502", "Patriot"), ("04CB", "ADATA"), ("80CE000080CE", "Samsung"), ("JEDEC ID:80 AD", "SK hynix"),
    ("7F98000000000000", "Kingston"), ("Patriot Memory (PDP Systems)", "Patriot"), ("Team Group Inc.", "TeamGroup"),
    ("Unknown", None), (None, None), ("<BAD INDEX>", None), ("0x0198", "Kingston"),
])
def test_module_vendor(manufacturer, vendor):
    from tunehost.facts.memory_parts import module_vendor
    found = module_vendor(manufacturer)
    assert (found[0] if found else None) == vendor


def test_platform_memory_limit():
    from tunehost.facts.memory_parts import platform_memory_limit
    assert platform_memory_limit("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", None)[0] == 2400
    assert platform_memory_limit("Intel(R) Core(TM) i3-8100 CPU @ 3.60GHz", "(board H310M S2P)")[0] == 2400
    assert platform_memory_limit("Intel(R) Core(TM) i3-8100 CPU @ 3.60GHz", "(board Z390 UD)") is None
    assert platform_memory_limit(None, None) is None
