"""Part number -> rated speed. The corpus part numbers (tests/data/corpus/dmidecode/, see SOURCES.md) first, then
each vendor's documented naming scheme, then parts that must stay unknown (never a guess)."""

from __future__ import annotations

import pytest

from tunehost.memory_parts import cpu_memory_limit, is_standard_grade, rated_speed, snap_grade

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
    assert cpu_memory_limit("AMD EPYC 9654 96-Core Processor") is None
    assert cpu_memory_limit(None) is None
