"""What a memory module is rated for, from its part number — and the speed grades that exist.

dmidecode's `Speed` is usually the module's JEDEC (SPD) speed, not the XMP/EXPO rating printed on the box: with
XMP/EXPO off a DDR5-6000 kit shows `Speed: 4800 MT/s` and `Configured Memory Speed: 4800 MT/s`, and only the part
number (F5-6000J3238F16G) says it is a 6000 kit. The rules below follow each vendor's documented naming scheme.

    rated_speed("F5-6000J3238F16G") -> PartRating(speed_mts=6000, vendor="G.Skill", profile=True, ...)

`profile` is True when the rating is an overclocking profile (XMP/EXPO) the firmware must be told to use, False
when it is a JEDEC rating the firmware applies by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# data rates that exist as module grades (JEDEC bins and XMP/EXPO kit speeds), MT/s
STANDARD_GRADES = (
    800, 1066, 1333, 1600, 1866, 2133, 2400, 2666, 2933, 3000, 3200, 3333, 3466, 3600, 3733, 3800, 3866, 4000, 4133,
    4266, 4400, 4600, 4800, 5000, 5200, 5400, 5600, 5800, 6000, 6200, 6400, 6600, 6800, 7000, 7200, 7400, 7467, 7500,
    7600, 7800, 8000, 8200, 8400, 8533, 8800, 9000, 9200, 9600,
)
# the fastest JEDEC bin shipping modules carry in their SPD: a configured speed above it means an XMP/EXPO profile
JEDEC_MAX = {"DDR3": 2133, "DDR4": 3200, "DDR5": 6400}
# the JEDEC base that XMP/EXPO kits fall back to with the profile off (their SPD default)
JEDEC_BASE = {"DDR3": 1333, "DDR4": 2133, "DDR5": 4800}


def is_standard_grade(mts: int | None) -> bool:
    """A plausible data rate (800-10000 MT/s, a real grade): dmidecode's `Speed: 12800 MT/s` on a DDR5-5600 is not."""
    if mts is None or not 800 <= mts <= 10000:
        return False
    return mts in STANDARD_GRADES or mts % 100 in (0, 33, 66, 67)


def snap_grade(approx: int) -> int:
    """The grade a rounded speed stands for: 2660 -> 2666, 1860 -> 1866, 3600 -> 3600."""
    best = min(STANDARD_GRADES, key=lambda g: abs(g - approx))
    return best if abs(best - approx) <= max(40, approx * 0.015) else approx


def generation(mem_type: str | None) -> str | None:
    """"DDR5" / "LPDDR5" / ... -> the key of JEDEC_MAX for socketed DDR, None otherwise."""
    t = (mem_type or "").upper().strip()
    return t if t in JEDEC_MAX else None


@dataclass(frozen=True)
class PartRating:
    part: str
    speed_mts: int
    vendor: str
    profile: bool   # the rating is an XMP/EXPO profile (True) or JEDEC (False)
    rule: str       # the naming scheme that gave it, shown as evidence

    def describe(self) -> str:
        kind = "XMP/EXPO" if self.profile else "JEDEC"
        return f"{self.part}: {self.vendor} {self.rule} -> {self.speed_mts} MT/s ({kind})"


def _hundreds(code: str) -> int:
    """Two digits in hundreds of MT/s ("36" -> 3600, "26" -> 2666), three in tens ("360" -> 3600, "266" -> 2666)."""
    value = int(code)
    if len(code) >= 4:
        return value
    scale = 100 if len(code) <= 2 else 10
    for grade in STANDARD_GRADES:
        if grade // scale == value:
            return grade
    return value * scale


def _enthusiast(gen: str, speed: int) -> bool:
    """Enthusiast kits are XMP/EXPO-rated above their generation's JEDEC base (DDR4 2133, DDR5 4800)."""
    return speed > JEDEC_BASE.get(gen, 0)


_GEN = {"2": "DDR2", "3": "DDR3", "4": "DDR4", "5": "DDR5"}
_SAMSUNG = {  # the speed letters after "-C" in Samsung module numbers (M378A2G43CB3-CWE)
    "DDR4": {"PB": 2133, "RC": 2400, "TD": 2666, "VF": 2933, "WE": 3200},
    "DDR5": {"QK": 4800, "WM": 5600, "CP": 6400},
}
_HYNIX_DDR4 = {"TF": 2133, "UH": 2400, "VK": 2666, "WM": 2933, "XN": 3200}
_MICRON_DDR4 = {"2G1": 2133, "2G3": 2400, "2G6": 2666, "2G9": 2933, "3G2": 3200}
# Micron LPDDR speed grade = tCK of WCK/CK in tens of ps ("-026" = 0.26 ns -> LPDDR5X-7500 class)
_MICRON_LP = {"062": 3200, "053": 3733, "046": 4266, "031": 6400, "026": 7500, "023": 8533}

Rule = tuple[str, "re.Pattern[str]", Callable[["re.Match[str]"], tuple[int, bool] | None], str]
_RULES: list[Rule] = [
    # G.Skill: F4-3600C18-8GVK, F5-6000J3238F16G (F<gen>-<speed>...)
    ("G.Skill", re.compile(r"^F([2345])-(\d{4})"),
     lambda m: (int(m[2]), _enthusiast(_GEN[m[1]], int(m[2]))), "F<gen>-<speed>"),
    # Corsair: CMK32GX4M2B3200C16, CMH32GX5M2B5600Z36, CMT32GX5M2X6000C36, CMSX16GX4M2A2666C18
    ("Corsair", re.compile(r"^CM[A-Z0-9]*?\d+GX([345])M\d+[A-Z](\d{4})"),
     lambda m: (int(m[2]), _enthusiast(_GEN[m[1]], int(m[2]))), "CM..GX<gen>M<n><ver><speed>"),
    # Kingston FURY / HyperX: KF560C30-16 (DDR5-6000), KF436C18BB/16, HX432C16FB3/8, HX318C10F/8
    ("Kingston", re.compile(r"^(?:KF|HX)([345])(\d{2})C"),
     lambda m: (_hundreds(m[2]), _enthusiast(_GEN[m[1]], _hundreds(m[2]))), "KF/HX<gen><speed/100>C<CL>"),
    # Kingston ValueRAM / server / branded (JEDEC): KVR32N22S8/8, KVR48U40BS8-16, KSM32RD4/32, KCP432NS8/8
    ("Kingston", re.compile(r"^(?:KVR|KSM)(\d{2})[A-Z]"), lambda m: (_hundreds(m[1]), False), "KVR/KSM<speed/100>"),
    ("Kingston", re.compile(r"^KCP[345](\d{2})[A-Z]"), lambda m: (_hundreds(m[1]), False), "KCP<gen><speed/100>"),
    # Crucial Ballistix: BL2K16G36C16U4B (3600), BLM2K8G44C19U4B (4400), BLS16G4D32AESB (3200), BLS8G4D240FSB
    ("Crucial", re.compile(r"^BL[SMT]?(?:\d+K)?\d+G(\d{2})C\d"), lambda m: (_hundreds(m[1]), True),
     "BL..G<speed/100>C<CL>"),
    ("Crucial", re.compile(r"^BL[SMT]?(?:\d+K)?\d+G4D(\d{2,3})[A-Z]"), lambda m: (_hundreds(m[1]), True),
     "BLS..G4D<speed>"),
    # Crucial DDR5: CT16G48C40U5 (4800 JEDEC), CT32G56C46S5, CP2K16G60C36U5B (Pro 6000, XMP/EXPO)
    ("Crucial", re.compile(r"^C([TP])(?:\d+K)?\d+G(\d{2})C\d{2}[A-Z]*5"),
     lambda m: (_hundreds(m[2]), m[1] == "P" and _hundreds(m[2]) > 5600), "C[TP]..G<speed/100>C<CL>..5"),
    # Crucial DDR4: CT16G4DFRA32A (3200), CT8G4SFRA266 (2666), CT16G4SFD832A, CT4G4DFS8213, CP16G4DFRA32A
    ("Crucial", re.compile(r"^C[TP](?:\d+K)?\d+G4[A-Z]+?8?(\d{2,3})(?:[A-Z.]|$)"),
     lambda m: (_hundreds(m[1]), False), "C[TP]..G4<org><speed>"),
    # TeamGroup: TF3D416G3600HC18JDC01, TLZGD416G3200HC16FDC01, FF3D516G6000HC38A, TED416G3200C2201 (Elite, JEDEC)
    ("TeamGroup", re.compile(r"^(T[A-Z]|F[A-Z])[A-Z0-9]*?([345])\d*?\d+G(\d{4})H?C\d"),
     lambda m: (int(m[3]), m[1] != "TE" and _enthusiast(_GEN[m[2]], int(m[3]))), "..<size>G<speed>[H]C<CL>"),
    # Patriot: PVS416G360C8 (Viper Steel 3600), PV416G320C6, PVV532G620C40K, PSD48G266681 (Signature, JEDEC)
    ("Patriot", re.compile(r"^P([A-Z]{1,4})([345])\d+G(\d{3,4})"),
     lambda m: (_hundreds(m[3]), m[1].startswith("V") and _enthusiast(_GEN[m[2]], _hundreds(m[3]))),
     "P<line><gen><size>G<speed>"),
    # ADATA: AX4U360038G18 / AX5U6000C3016G (XPG, XMP/EXPO), AD4U32008G22 / AD5U48008G (JEDEC)
    ("ADATA", re.compile(r"^A([DX])([345])[USR](\d{4})"),
     lambda m: (int(m[3]), m[1] == "X" and _enthusiast(_GEN[m[2]], int(m[3]))), "A[DX]<gen><type><speed>"),
    # Samsung: M378A2G43CB3-CWE (DDR4-3200), M321R8GA0BB0-CQKZJ (DDR5-4800), M425R2GA3BB0-CWMOD (DDR5-5600)
    ("Samsung", re.compile(r"^M\d{3}([AR])\w*-[CIB]([A-Z]{2})"),
     lambda m: (lambda s: (s, False) if s else None)(_SAMSUNG["DDR4" if m[1] == "A" else "DDR5"].get(m[2])),
     "M<type>..-C<speed code>"),
    # SK hynix DDR4: HMA81GU6CJR8N-VK (2666), HMAA4GR7AJR8N-XN (3200). DDR5 (HMCG...) carry no speed code we
    # could verify, so their `Speed` field is used instead.
    ("SK hynix", re.compile(r"^HMA\w+-([A-Z]{2})"),
     lambda m: (lambda s: (s, False) if s else None)(_HYNIX_DDR4.get(m[1])), "HMA..-<speed code>"),
    # Micron DDR4 modules: 36ASF8G72PZ-3G2E1 (3200); DDR5 modules: MTC20F2085S1RC48BA1 (4800)
    ("Micron", re.compile(r"^\d{1,2}A[A-Z]{2}\w+-(\dG\d)"),
     lambda m: (lambda s: (s, False) if s else None)(_MICRON_DDR4.get(m[1])), "..-<speed code>"),
    ("Micron", re.compile(r"^MTC\w*?[A-Z]C(\d{2})B[A-Z0-9]*$"), lambda m: (_hundreds(m[1]), False),
     "MTC..C<speed/100>B.."),
    # Micron LPDDR5/5X/4X packages: MT62F2G32D4DS-026 WT (LPDDR5X-7500 class), MT62F1G32D2DS-031
    ("Micron", re.compile(r"^MT(?:53|62|63|64)[A-Z]\w*-(0\d\d)\b"),
     lambda m: (lambda s: (s, False) if s else None)(_MICRON_LP.get(m[1])), "MT6x..-<tCK grade>"),
    # generic SPD names some kits carry: "UD5-8000" (TeamGroup), "DDR5-6000"
    ("generic", re.compile(r"^(?:U?D|DDR)([345])[-_ ](\d{4})\b"),
     lambda m: (int(m[2]), _enthusiast(_GEN[m[1]], int(m[2]))), "<type>-<speed>"),
]


def rated_speed(part_number: str | None) -> PartRating | None:
    """The rated data rate a part number encodes, or None when no known scheme matches (never a guess)."""
    if not part_number:
        return None
    part = part_number.strip().upper()
    for vendor, pattern, decode, rule in _RULES:
        match = pattern.match(part)
        if not match:
            continue
        try:
            decoded = decode(match)
        except (ValueError, KeyError, IndexError):
            decoded = None
        if decoded and is_standard_grade(decoded[0]):
            return PartRating(part_number.strip(), decoded[0], vendor, bool(decoded[1]), rule)
    return None


# server CPUs whose memory controller caps DIMMs below their rating (Intel ARK "Max Memory Speed")
_CPU_MEMORY_LIMITS: tuple[tuple["re.Pattern[str]", int, str], ...] = (
    (re.compile(r"Xeon\(R\) Silver 43\d\d"), 2666, "DDR4-2666"),    # Ice Lake-SP Silver
    (re.compile(r"Xeon\(R\) Silver 4[12]\d\d"), 2400, "DDR4-2400"),  # Skylake/Cascade Lake-SP Silver
    (re.compile(r"Xeon\(R\) Bronze 3[12]\d\d"), 2133, "DDR4-2133"),
    (re.compile(r"Xeon\(R\) Gold 5[12]\d\d"), 2666, "DDR4-2666"),
    (re.compile(r"Xeon\(R\) Gold 53\d\d"), 2933, "DDR4-2933"),
)


def cpu_memory_limit(cpu_model: str | None) -> tuple[int, str] | None:
    """(MT/s, "DDR4-2666") for CPUs known to cap memory speed; None when unknown."""
    if not cpu_model:
        return None
    for pattern, mts, label in _CPU_MEMORY_LIMITS:
        if pattern.search(cpu_model):
            return mts, label
    return None
