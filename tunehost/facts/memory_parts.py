"""What a memory module is rated for, from its part number — and the speed grades that exist.

dmidecode's `Speed` is usually the module's JEDEC (SPD) speed, not the XMP/EXPO rating printed on the box: with
XMP/EXPO off a DDR5-6000 kit shows `Speed: 4800 MT/s` and `Configured Memory Speed: 4800 MT/s`, and only the part
number (F5-6000J3238F16G) says it is a 6000 kit. The rules below follow each vendor's documented naming scheme.

    rated_speed("F5-6000J3238F16G") -> PartRating(speed_mts=6000, vendor="G.Skill", profile=True, ...)

`profile` is True when the rating is an overclocking profile (XMP/EXPO) the firmware must be told to use, False
when it is a JEDEC rating the firmware applies by itself. Also here, one list per concept:
- module_family(part): part numbers that carry no rating — JEDEC-only families (their `Speed` is the rating) or
  rated-kit lines whose number does not say it ("rating unknown");
- module_vendor(manufacturer): the vendor from the Manufacturer field, a name or a JEDEC JEP106 id ("029E"), and
  whether it sells XMP/EXPO kits;
- cpu_memory_limit / platform_memory_limit: CPUs and chipsets that cap memory speed (not "XMP off").
Coverage of the rules on real data: scripts/ram_corpus.py and docs/checks.md (ram-speed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tunehost.facts.cpu_memory import cpu_memory

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
    gen: str | None = None  # "DDR4" when the part number says the generation

    def describe(self) -> str:
        kind = "XMP/EXPO" if self.profile else "JEDEC"
        return f"{self.part}: {self.vendor} {self.rule} -> {self.speed_mts} MT/s ({kind})"


@dataclass(frozen=True)
class PartFamily:
    """A part number whose family is known but which carries no rating: a JEDEC-only module (its SPD `Speed` is its
    rating) or a rated-kit line whose number does not say the rating ("rating unknown", never a guess)."""

    part: str
    vendor: str
    jedec: bool     # True: a JEDEC module (no XMP/EXPO profile); False: an XMP/EXPO kit with the rating not encoded
    rule: str


def _hundreds(code: str) -> int:
    """Two digits in hundreds of MT/s ("36" -> 3600, "26" -> 2666), three in tens ("360" -> 3600, "266" -> 2666),
    four as they are but snapped to the grade ("2606" -> 2666, "3601" -> 3600: Radeon/Neo Forza style)."""
    value = int(code)
    if len(code) >= 4:
        return value if value in STANDARD_GRADES else snap_grade(value)
    scale = 100 if len(code) <= 2 else 10
    for grade in STANDARD_GRADES:
        if grade // scale == value:
            return grade
    return value * scale


def _gen(digit: str | None, speed: int) -> str:
    """The generation a part number names ("3"/"4"/"5"), or the one its speed implies (DDR5 from 4800 up)."""
    if digit and digit in _GEN:
        return _GEN[digit]
    return "DDR5" if speed >= 4800 else "DDR4" if speed >= 2133 else "DDR3"


def _xmp(digit: str | None, speed: int) -> tuple[int, bool, str]:
    """(speed, profile, gen) for an enthusiast line: a profile when above its generation's JEDEC base."""
    gen = _gen(digit, speed)
    return speed, speed > JEDEC_BASE.get(gen, 0), gen


def _jedec(digit: str | None, speed: int) -> tuple[int, bool, str]:
    return speed, False, _gen(digit, speed)


def _code(table: dict[str, int], code: str, gen: str) -> tuple[int, bool, str] | None:
    speed = table.get(code)
    return (speed, False, gen) if speed else None


_GEN = {"2": "DDR2", "3": "DDR3", "4": "DDR4", "5": "DDR5"}
_SAMSUNG = {  # the speed letters after "-C" in Samsung module numbers (M378A2G43CB3-CWE, M378B5273DH0-CH9)
    "DDR3": {"F7": 800, "F8": 1066, "H9": 1333, "K0": 1600, "MA": 1866, "NB": 2133},
    "DDR4": {"PB": 2133, "RC": 2400, "TD": 2666, "VF": 2933, "WE": 3200},
    "DDR5": {"QK": 4800, "WM": 5600, "CP": 6400},
}
_SAMSUNG_GEN = {"B": "DDR3", "A": "DDR4", "R": "DDR5"}
_HYNIX = {"G7": 1066, "H9": 1333, "PB": 1600, "RD": 1866, "TF": 2133, "UH": 2400, "VK": 2666, "WM": 2933,
          "XN": 3200}  # SK hynix DDR3 (HMT) / DDR4 (HMA) module speed suffixes
_MICRON = {"1G1": 1066, "1G4": 1333, "1G6": 1600, "1G9": 1866, "2G1": 2133, "2G3": 2400, "2G4": 2400, "2G6": 2666,
           "2G9": 2933, "3G2": 3200}  # Micron DDR3/DDR4 module speed grades (8JTF..-1G6, 36ASF..-3G2)
# Micron LPDDR speed grade = tCK of WCK/CK in tens of ps ("-026" = 0.26 ns -> LPDDR5X-7500 class)
_MICRON_LP = {"062": 3200, "053": 3733, "046": 4266, "031": 6400, "026": 7500, "023": 8533}

Decoded = tuple[int, bool, str] | None
Rule = tuple[str, "re.Pattern[str]", Callable[["re.Match[str]"], Decoded], str]
# One entry per vendor naming scheme: (vendor, pattern on the upper-cased part number, decode -> (MT/s, profile,
# generation), the scheme as shown in evidence). Each comment names the scheme and real part numbers; the ones
# marked "linuxhw" are in tests/data/linuxhw_dmi (real dmidecode dumps), the others in tests/ram/test_memory_parts.py.
_RULES: list[Rule] = [
    # G.Skill: F<gen>-<speed>C<CL>-<size><line>: F4-3600C18-8GVK, F5-6000J3238F16G; DDR3 also by PC rate:
    # F3-12800CL9-4GBXL (PC3-12800 = DDR3-1600)
    ("G.Skill", re.compile(r"^F([2345])-(\d{4})[A-Z]"), lambda m: _xmp(m[1], int(m[2])), "F<gen>-<speed>"),
    ("G.Skill", re.compile(r"^F([23])-(\d{4,5})CL\d"), lambda m: _xmp(m[1], snap_grade(int(m[2]) // 8)),
     "F<gen>-<PC rate>CL<CL>"),
    # Corsair kits: CM<line><size>GX<gen>M<modules><ver><speed>C<CL>: CMK32GX4M2B3200C16, CMH32GX5M2B5600Z36
    ("Corsair", re.compile(r"^CM[A-Z0-9]*?\d+GX([345])M\d+[A-Z](\d{4})"), lambda m: _xmp(m[1], int(m[2])),
     "CM..GX<gen>M<n><ver><speed>"),
    # Corsair modules (the SPD of one DIMM of a kit): CM4X16GC3000C16K4D, CMWX16GC3200C16W2E, CMHX8GD3200C16H4E
    ("Corsair", re.compile(r"^CM([345]|[A-Z])X\d+G[A-Z](\d{4})[CZ]\d"),
     lambda m: _xmp(m[1] if m[1].isdigit() else None, int(m[2])), "CM<gen|line>X<size>G<ver><speed>C<CL>"),
    # Corsair DDR5 modules: CMK5X32G2B52C40A2 (5200), CMK5X16G1B52Z40A2
    ("Corsair", re.compile(r"^CM[A-Z]5X\d+G\d[A-Z](\d{2})[CZ]\d{2}"), lambda m: _xmp("5", _hundreds(m[1])),
     "CM<line>5X<size>G<n><ver><speed/100>C<CL>"),
    # Kingston FURY / HyperX, short form KF/HX<gen><speed/100>[C|R]<CL>: KF560C30-16, KF436C18BB/16, HX432C16FB3/8
    ("Kingston", re.compile(r"^(?:KF|HX)([345])(\d{2})[CR]\d{2}"), lambda m: _xmp(m[1], _hundreds(m[2])),
     "KF/HX<gen><speed/100>C<CL>"),
    # Kingston FURY / HyperX, SPD form KHX/KF<speed>C<CL>[D3|D4]: KHX3200C16D4/8GX, KHX2666C16/8G, KF3200C16D4/16GX,
    # KHX1600C10D3/8G (linuxhw)
    ("Kingston", re.compile(r"^(?:KHX|KF|HX)(\d{4})C\d{1,2}(?:D([345]))?"), lambda m: _xmp(m[2], int(m[1])),
     "KHX/KF<speed>C<CL>"),
    # Kingston FURY DDR5 whose SPD drops the "KF": 560C36-16 = KF560C36BB-16, 552C40-32 (linuxhw)
    ("Kingston", re.compile(r"^(5)(\d{2})C\d{2}-\d{1,3}$"), lambda m: _xmp(m[1], _hundreds(m[2])),
     "<gen><speed/100>C<CL>-<size> (FURY DDR5 SPD)"),
    # Kingston ValueRAM / server / branded (JEDEC): KVR32N22S8/8, KVR48U40BS8-16, KSM32RD4/32, KCP432NS8/8
    ("Kingston", re.compile(r"^(?:KVR|KSM)(\d{2})[A-Z]"), lambda m: _jedec(None, _hundreds(m[1])), "KVR/KSM<speed/100>"),
    ("Kingston", re.compile(r"^KCP([345])(\d{2})[A-Z]"), lambda m: _jedec(m[1], _hundreds(m[2])),
     "KCP<gen><speed/100>"),
    # Crucial Ballistix: BL2K16G36C16U4B (3600), BLM2K8G44C19U4B (4400), BLS16G4D32AESB (3200), BLS8G4D240FSB,
    # BLE8G4D36BEEAK (Elite), BLS8G3D1609DS1S00 (DDR3-1600 CL9)
    ("Crucial", re.compile(r"^BL[SMTE]?(?:\d+K)?\d+G(\d{2})C\d"), lambda m: _xmp(None, _hundreds(m[1])),
     "BL..G<speed/100>C<CL>"),
    ("Crucial", re.compile(r"^BL[SMTE]?(?:\d+K)?\d+G([34])D(\d{2})(?=\d{2}[A-Z]|[A-Z])"),
     lambda m: _xmp(m[1], _hundreds(m[2])), "BL..G<gen>D<speed/100>"),
    ("Crucial", re.compile(r"^BL[SMTE]?(?:\d+K)?\d+G([34])D(\d{3})[A-Z]"), lambda m: _xmp(m[1], _hundreds(m[2])),
     "BL..G<gen>D<speed/10>"),
    # Crucial DDR5: CT16G48C40U5 (4800 JEDEC), CT32G56C46S5, CP2K16G60C36U5B (Pro 6000, XMP/EXPO)
    ("Crucial", re.compile(r"^C([TP])(?:\d+K)?\d+G(\d{2})C\d{2}[A-Z]*5"),
     lambda m: (_hundreds(m[2]), m[1] == "P" and _hundreds(m[2]) > 5600, "DDR5"), "C[TP]..G<speed/100>C<CL>..5"),
    # Crucial DDR4: CT16G4DFRA32A (3200), CT8G4SFRA266 (2666), CT16G4SFD832A, CT4G4DFS8213, CT4G4DFS6266 (linuxhw)
    ("Crucial", re.compile(r"^C[TP](?:\d+K)?\d+G4[A-Z]+?[68]?(\d{2,3})(?:[A-Z.]|$)"),
     lambda m: _jedec("4", _hundreds(m[1])), "C[TP]..G4<org><speed>"),
    # Crucial DDR3: CT51264BA160B (DDR3-1600), CT102464BA160B; Crucial Basics DDR4: CB8GU2666 (linuxhw)
    ("Crucial", re.compile(r"^CT\d+B[AD](\d{3})B?"), lambda m: _jedec("3", _hundreds(m[1])), "CT..BA<speed/10>"),
    ("Crucial", re.compile(r"^CB\d+GU(\d{4})"), lambda m: _jedec("4", int(m[1])), "CB<size>GU<speed>"),
    # TeamGroup: TF3D416G3600HC18JDC01, TLZGD416G3200HC16FDC01, FF3D516G6000HC38A, TED416G3200C2201 (Elite, JEDEC)
    ("TeamGroup", re.compile(r"^(T[A-Z]|F[A-Z])[A-Z0-9]*?([345])\d*?\d+G(\d{4})H?C\d"),
     lambda m: (int(m[3]), m[1] != "TE" and _xmp(m[2], int(m[3]))[1], _gen(m[2], int(m[3]))),
     "..<size>G<speed>[H]C<CL>"),
    # TeamGroup's SPD name TEAMGROUP-UD<gen>-<speed> (T-Force and Elite alike), Timetec the same way:
    # TEAMGROUP-UD4-3200, TEAMGROUP-UD3-1600, TIMETEC-UD4-3600 (linuxhw); Team Elite DDR3 "Team-Elite-1600" (JEDEC)
    ("TeamGroup", re.compile(r"^TEAMGROUP-[UES]D([345])-(\d{4})$"), lambda m: _xmp(m[1], int(m[2])),
     "TEAMGROUP-UD<gen>-<speed>"),
    ("Timetec", re.compile(r"^TIMETEC-UD([345])-(\d{4})$"), lambda m: _xmp(m[1], int(m[2])), "TIMETEC-UD<gen>-<speed>"),
    ("TeamGroup", re.compile(r"^TEAM-+ELITE-(\d{4})$"), lambda m: _jedec(None, int(m[1])), "Team-Elite-<speed>"),
    # Patriot: PVS416G360C8 (Viper Steel 3600), PV416G320C6, PVV532G620C40K, PSD48G266681 (Signature, JEDEC)
    ("Patriot", re.compile(r"^P([A-Z]{1,4})([345])\d+G(\d{3,4})"),
     lambda m: (_hundreds(m[3]), m[1].startswith("V") and _xmp(m[2], _hundreds(m[3]))[1], _GEN[m[2]]),
     "P<line><gen><size>G<speed>"),
    # Patriot Viper's SPD name "<speed> C<CL> Series": 3200 C16 Series, 3600 C18 Series, 1600 CL9 Series (linuxhw)
    ("Patriot", re.compile(r"^(\d{4}) CL?\d{1,2} SERIES$"), lambda m: _xmp(None, int(m[1])), "<speed> C<CL> Series"),
    # ADATA OEM modules (JEDEC): AO2P26KC8T1-BXGSHC (2666), AM2P24HC4U1-B9QS (2400), AO2P32NC8W1-BD3SHC (linuxhw)
    ("ADATA", re.compile(r"^A[MO]\dP(\d{2})[A-Z]C\d[A-Z]\d"), lambda m: _jedec("4", _hundreds(m[1])),
     "A[MO]<n>P<speed/100>.. (OEM)"),
    # ADATA: AX4U360038G18 / AX5U6000C3016G (XPG, XMP/EXPO), AD4U32008G22 / AD5U48008G (JEDEC)
    ("ADATA", re.compile(r"^A([DX])([345])[USR](\d{4})"),
     lambda m: (int(m[3]), m[1] == "X" and _xmp(m[2], int(m[3]))[1], _GEN[m[2]]), "A[DX]<gen><type><speed>"),
    # GeIL's SPD name (also OLOy and other Golden Empire-made kits): CL16-18-18 D4-3000, CL11-11-11 D3-1600 (linuxhw)
    ("GeIL", re.compile(r"^CL\d{1,2}-\d{1,2}-\d{1,2} D(?:DR)?([345])-(\d{4})$"), lambda m: _xmp(m[1], int(m[2])),
     "CL<timings> D<gen>-<speed>"),
    # AMD Radeon memory: R<series><S><gen><size>G<speed code><U|E|S>: R748G2606U2S (R7 DDR4-2666), R9S48G3206U2S
    # (R9 3200), R744G2133U1S, R534G1601U1S (DDR3-1600) (linuxhw)
    ("AMD Radeon", re.compile(r"^R([3579])S?([345])(\d{1,2})G(\d{4})[UES]"), lambda m: _xmp(m[2], _hundreds(m[4][:2])),
     "R<series><gen><size>G<speed>"),
    # GoodRAM: GR2400D464L17S/8G (JEDEC), IRDM IR2400D464L15S/8G, IRX3000D464L16S/8G, IRP3600D4V64L17S/8G,
    # IR-6000D564L30S/16G (DDR5), Play GY1600D364L9S/4G (linuxhw)
    ("GoodRAM", re.compile(r"^(GR)(\d{4})D([345])"), lambda m: _jedec(m[3], int(m[2])), "GR<speed>D<gen>"),
    ("GoodRAM", re.compile(r"^(IRX|IRP|IRG|IR-?|GY|GX)(\d{4})D([345])"), lambda m: _xmp(m[3], int(m[2])),
     "IR[X|P]<speed>D<gen> (IRDM)"),
    # Thermaltake TOUGHRAM: R009D408GX2-3200C16A, R019D408GX2-3600C18A, R009R432GX2-3600C18A (linuxhw)
    ("Thermaltake", re.compile(r"^R\d{3}[A-Z]([45])\d{2}GX\d-(\d{4})C\d{2}"), lambda m: _xmp(m[1], int(m[2])),
     "R<code><gen><size>GX<n>-<speed>C<CL>"),
    # PNY XLR8 / Performance: MD16GK2D4320016XR (XLR8 kit 3200), MD16GSD54800-BLK (DDR5-4800) (linuxhw)
    ("PNY", re.compile(r"^MD\d+G(?:K\d|S)D([45])(\d{4})"), lambda m: _xmp(m[1], int(m[2])), "MD<size>G..D<gen><speed>"),
    # Silicon Power: SP008GBLFU240B02 (JEDEC 2400), SP008GXLZU320BSA (XPOWER 3200) (linuxhw)
    ("Silicon Power", re.compile(r"^SP\d{3}G([A-Z])[A-Z]{2}U(\d{3})"),
     lambda m: (_hundreds(m[2]), m[1] == "X" and _xmp(None, _hundreds(m[2]))[1], _gen(None, _hundreds(m[2]))),
     "SP<size>G<line>..U<speed/10>"),
    # Lexar: LD4AU016G-H3200GST (3200), LD4BU016G-3600WG (ARES 3600), LD5EU016G-6400LA, LD5FU016G-6000GA (linuxhw)
    ("Lexar", re.compile(r"^LD([345])[A-Z]U\d{3}G-[A-Z]?(\d{4})"), lambda m: _xmp(m[1], int(m[2])),
     "LD<gen><line>U<size>G-<speed>"),
    # Neo Forza: NMUD480E82-3200D, NMUD416E82-3601D (3600), NMUD480E85-3200E (linuxhw)
    ("Neo Forza", re.compile(r"^NM[UB]D\d{3}[A-Z]\d{2}-(\d{4})"), lambda m: _xmp("4", _hundreds(m[1])),
     "NMUD<size><rev>-<speed>"),
    # OLOy / Chun Well: [M|N]D<gen>U<size><speed/100><CL>: MD4U1636181C (16 GB 3600 CL18), D4U0830160B,
    # ND4U1632162BRQDE, D5U1664320I-K91 (DDR5-6400) (linuxhw)
    ("OLOy", re.compile(r"^[MN]?D([45])U(\d{2})(\d{2})(\d{2})"), lambda m: _xmp(m[1], _hundreds(m[3])),
     "[M]D<gen>U<size><speed/100><CL>"),
    # Mushkin: MRX4U320GJJM8G (Redline 3200), MLX4C400JNNM16G, MR[A/B]4U266GHHF8G (linuxhw)
    ("Mushkin", re.compile(r"^M[RLBE][A-Z]?(?:\[[A-Z/]+\])?([345])[UC](\d{3})[A-Z]"),
     lambda m: _xmp(m[1], _hundreds(m[2])), "M<line><gen><U|C><speed/10>"),
    # KLEVV (Essencore): KD48GU880-32A160U (CRAS/BOLT 3200 CL16), KD4AGUA80-36A180B (linuxhw)
    ("KLEVV", re.compile(r"^KD([45])[0-9A-Z]GU[0-9A-Z]{3}-(\d{2})[A-Z]\d{3}"), lambda m: _xmp(m[1], _hundreds(m[2])),
     "KD<gen><size>GU...-<speed/100><bin><CL>"),
    # Gigabyte AORUS: AR32C16S8K2HU416R (3200), GP-ARS16G44 (4400), GP-GR26C16S8K1HU408 (2666) (linuxhw)
    ("Gigabyte", re.compile(r"^(?:GP-)?A?R(?:S\d+G)?(\d{2})(?:C\d{2}|$|D5)"), lambda m: _xmp(None, _hundreds(m[1])),
     "AR<speed/100>C<CL> / GP-ARS<size>G<speed/100>"),
    ("Gigabyte", re.compile(r"^GP-GR(\d{2})C\d{2}"), lambda m: _xmp("4", _hundreds(m[1])), "GP-GR<speed/100>C<CL>"),
    # Gloway: TYA4U2666D19082C, TAC4U3200E16081C (linuxhw)
    ("Gloway", re.compile(r"^T[A-Z]{2}([45])U(\d{4})[A-Z]\d{2}"), lambda m: _xmp(m[1], int(m[2])),
     "T<line><gen>U<speed>"),
    # KingSpec: KS3200D4P12008G (linuxhw); Transcend JetRAM: JM2666HLB-8G (JEDEC) (linuxhw)
    ("KingSpec", re.compile(r"^KS(\d{4})D([345])"), lambda m: _jedec(m[2], int(m[1])), "KS<speed>D<gen>"),
    ("Transcend", re.compile(r"^JM(\d{4})H[A-Z]{2}"), lambda m: _jedec("4", int(m[1])), "JM<speed>H.."),
    # Ramaxel (OEM, JEDEC): RMUA5110ME78HAF-2666, RMUA5090KB78HAF2133 (linuxhw)
    ("Ramaxel", re.compile(r"^RM[A-Z]{2}\d{4}[A-Z0-9]{6,10}-?(\d{4})$"), lambda m: _jedec(None, int(m[1])),
     "RM....-<speed>"),
    # Samsung: M378A2G43CB3-CWE (DDR4-3200), M321R8GA0BB0-CQKZJ (DDR5-4800), M378B5273DH0-CH9 (DDR3-1333)
    ("Samsung", re.compile(r"^M\d{3}([ABR])\w*-[CIBH]([A-Z0-9]{2})"),
     lambda m: _code(_SAMSUNG[_SAMSUNG_GEN[m[1]]], m[2], _SAMSUNG_GEN[m[1]]), "M<type>..-C<speed code>"),
    # SK hynix DDR3/DDR4: HMT351U6CFR8C-PB (1600), HMA81GU6CJR8N-VK (2666), HMAA4GR7AJR8N-XN (3200). DDR5 (HMCG...)
    # carry no speed code we could verify: they are JEDEC modules (module_family), their `Speed` is the rating.
    ("SK hynix", re.compile(r"^HM([AT])\w+-([A-Z][A-Z0-9])"),
     lambda m: _code(_HYNIX, m[2], "DDR4" if m[1] == "A" else "DDR3"), "HM[AT]..-<speed code>"),
    # Micron DDR3/DDR4 modules: 36ASF8G72PZ-3G2E1 (3200), 8ATF1G64AZ-2G3H1, 8JTF25664AZ-1G6M1 (DDR3-1600)
    ("Micron", re.compile(r"^\d{1,2}([AJK])[A-Z]{2}\w+-(\d[G]\d)"),
     lambda m: _code(_MICRON, m[2], "DDR4" if m[1] == "A" else "DDR3"), "..-<speed code>"),
    # Micron DDR5 modules: MTC20F2085S1RC48BA1 (4800)
    ("Micron", re.compile(r"^MTC\w*?[A-Z]C(\d{2})B[A-Z0-9]*(?: \w+)?$"), lambda m: _jedec("5", _hundreds(m[1])),
     "MTC..C<speed/100>B.."),
    # Micron LPDDR5/5X/4X packages: MT62F2G32D4DS-026 WT (LPDDR5X-7500 class), MT62F1G32D2DS-031
    ("Micron", re.compile(r"^MT(?:53|62|63|64)[A-Z]\w*-(0\d\d)\b"),
     lambda m: (lambda s: (s, False, "LPDDR") if s else None)(_MICRON_LP.get(m[1])), "MT6x..-<tCK grade>"),
    # generic SPD names some kits carry: "UD5-8000" (TeamGroup), "DDR5-6000", "DDR4 16GB 3200MHz" (linuxhw)
    ("generic", re.compile(r"^(?:U?D|DDR)([345])[-_ ](\d{4})\b"), lambda m: _xmp(m[1], int(m[2])), "<type>-<speed>"),
    ("generic", re.compile(r"^DDR([345]) (?:\d+GB )?(\d{4})(?:MHZ)?$"), lambda m: _xmp(m[1], int(m[2])),
     "DDR<gen> <size> <speed>MHz"),
]

# Part numbers that name a family but no rating. JEDEC-only families: their SPD `Speed` is the rating.
_FAMILIES: list[tuple[str, "re.Pattern[str]", bool, str]] = [
    # Kingston module numbers (ValueRAM and OEM): 9905702-017.A00G, 99U5471-020.A00LF, 9965745-020.A00G
    ("Kingston", re.compile(r"^99(?:05|65|U5|P5)\d{3}-\d{3}\.[A-Z]\d{2}"), True, "99xxxxx-xxx module number (JEDEC)"),
    # Kingston-made OEM modules for HP / Acer / Dell: HP26D4U9S8ME-8X, ACR24D4U7S8MB-8, KTP9W1-MIE, X2YH1K-MIE
    # (also MSI24D4U7S8MB-8, CBD26D4U9S8ME-8, TF32D4U2S1MEH-8, LV32D4U2S8SD-8, XN205T-MIE2, KM0VW4-MIH) (linuxhw)
    ("Kingston", re.compile(r"^(?:HP|ACR|MSI|CBD|TF|LV)\d{2}D[45]U\d|^[A-Z0-9]{6}-(?:MI[A-Z]\d?|HYD)\b"), True,
     "OEM module (JEDEC)"),
    # SK hynix DDR5 (HMCG78AGBUA081N), Samsung DDR5 (M323R2GA3BB0-CQKOD) without a verified speed code
    ("SK hynix", re.compile(r"^HMC[GT]\w{9,}$"), True, "HMCG.. DDR5 module (JEDEC)"),
    ("Samsung", re.compile(r"^M[34]\d{2}[ABR]\w{6,}"), True, "M3.. module (JEDEC)"),
    ("Micron", re.compile(r"^\d{1,2}[AJKH][A-Z]{2}\w{5,}-"), True, "Micron module (JEDEC)"),
    ("Nanya", re.compile(r"^NT\d+[GM][TC]\d{2}"), True, "NT.. module (JEDEC)"),
    ("Apacer", re.compile(r"^(?:D1[23]\.\d{4}|7[5-9]\.[A-Z0-9]{5}\.)"), True, "OEM module number (JEDEC)"),
    ("HP", re.compile(r"^\d{6}-[0-9B]\d{2}$"), True, "HP spare part number (JEDEC)"),
    # rated-kit lines whose number does not carry the rating: PNY 8GBF1X08QFHH38-135-K, Asgard VMA45UG-MEC1U2AW2
    ("PNY", re.compile(r"^\d+G[BF]\w*-1[23]5?-K$"), False, "Anarchy/XLR8 SPD name (no rating in it)"),
    ("Asgard", re.compile(r"^VMA\d{2}U[A-Z]-"), False, "VMA.. SPD name (no rating in it)"),
]


def rated_speed(part_number: str | None) -> PartRating | None:
    """The rated data rate a part number encodes, or None when no known scheme matches (never a guess)."""
    if not part_number or not isinstance(part_number, str):
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
            return PartRating(part_number.strip(), decoded[0], vendor, bool(decoded[1]), rule,
                              decoded[2] if decoded[2] in JEDEC_MAX else None)
    return None


def module_family(part_number: str | None) -> PartFamily | None:
    """The family of a part number that carries no rating (JEDEC-only, or a kit whose rating it does not say)."""
    if not part_number or not isinstance(part_number, str):
        return None
    part = part_number.strip().upper()
    for vendor, pattern, jedec, rule in _FAMILIES:
        if pattern.match(part):
            return PartFamily(part_number.strip(), vendor, jedec, rule)
    return None


# Vendors by the Manufacturer field: its name, or the JEDEC JEP106 id (bank, id without parity) some firmware prints
# instead ("029E", "80AD000080AD", "7F98000000000000", "JEDEC ID:80 CE"). `rated` = the vendor sells XMP/EXPO kits.
# Ids marked "seen" were matched to the vendor by the part numbers they carry in linuxhw/DMI.
VENDORS: tuple[tuple[str, bool, "re.Pattern[str]", frozenset[tuple[int, int]]], ...] = (
    ("Kingston", True, re.compile(r"kingston|kinston|hyperx", re.I), frozenset({(2, 0x18)})),
    ("Corsair", True, re.compile(r"corsair", re.I), frozenset({(3, 0x1E), (3, 0x15)})),        # 0215 seen
    ("G.Skill", True, re.compile(r"g\.?[ -]?skill", re.I), frozenset({(5, 0x4D), (5, 0x20)})),  # 0420 seen
    ("Crucial", True, re.compile(r"crucial|ballistix", re.I), frozenset({(6, 0x1B), (20, 0x15)})),  # 1315 seen
    ("TeamGroup", True, re.compile(r"team ?group|^team\b|t-?force", re.I), frozenset({(5, 0x6F), (5, 0x23)})),
    ("Patriot", True, re.compile(r"patriot", re.I), frozenset({(6, 0x02), (20, 0x02)})),        # 8502, 1302 seen
    ("ADATA", True, re.compile(r"a-?data|xpg", re.I), frozenset({(5, 0x4B)})),
    ("Thermaltake", True, re.compile(r"thermaltake", re.I), frozenset({(11, 0x42)})),            # 8AC2 seen
    ("PNY", True, re.compile(r"\bpny\b", re.I), frozenset({(2, 0x3A)})),
    ("Silicon Power", True, re.compile(r"silicon[ -]?power", re.I), frozenset()),
    ("Lexar", True, re.compile(r"lexar", re.I), frozenset({(11, 0x76)})),                        # 8A76 seen
    ("Netac", True, re.compile(r"netac", re.I), frozenset()),
    ("GoodRAM", True, re.compile(r"goodram|wilk", re.I), frozenset({(8, 0x5D), (8, 0x13)})),    # 075D, 0793 seen
    ("Neo Forza", True, re.compile(r"neo ?forza", re.I), frozenset({(10, 0x45)})),               # 8945 seen
    ("Kingbank", True, re.compile(r"king ?bank", re.I), frozenset()),
    ("Asgard", True, re.compile(r"asgard", re.I), frozenset()),
    ("OLOy", True, re.compile(r"oloy|chun well", re.I), frozenset({(11, 0x45)})),               # 8A45 seen
    ("Mushkin", True, re.compile(r"mushkin", re.I), frozenset({(4, 0x14)})),                     # 8394 seen
    ("GeIL", True, re.compile(r"geil|golden empire", re.I), frozenset({(4, 0x13)})),
    ("KLEVV", True, re.compile(r"klevv|essencore", re.I), frozenset()),
    ("Apacer", True, re.compile(r"apacer", re.I), frozenset({(2, 0x7A)})),
    ("Gigabyte", True, re.compile(r"giga-?byte|aorus", re.I), frozenset({(10, 0x72)})),          # 89F2 seen
    ("Timetec", True, re.compile(r"timetec", re.I), frozenset({(13, 0x26)})),
    ("Gloway", True, re.compile(r"gloway", re.I), frozenset({(9, 0x13)})),
    ("V-Color", True, re.compile(r"v-?color", re.I), frozenset()),
    ("Samsung", False, re.compile(r"samsung", re.I), frozenset({(1, 0x4E)})),
    ("SK hynix", False, re.compile(r"hynix|hyundai", re.I), frozenset({(1, 0x2D)})),
    ("Micron", False, re.compile(r"micron", re.I), frozenset({(1, 0x2C)})),
    ("Nanya", False, re.compile(r"nanya", re.I), frozenset({(4, 0x0B)})),
    ("Ramaxel", False, re.compile(r"ramaxel", re.I), frozenset({(5, 0x43)})),
)
_JEDEC_HEX = re.compile(r"^(?:JEDEC ID:|UNKNOWN - \[)?\s*(?:0X)?([0-9A-F ]{4,23})\]?$")


def jedec_id(manufacturer: str | None) -> tuple[int, int] | None:
    """(bank, id) from a Manufacturer field that holds a JEP106 code instead of a name; None for names."""
    if not manufacturer or not isinstance(manufacturer, str):
        return None
    m = _JEDEC_HEX.match(manufacturer.strip().upper())
    if not m:
        return None
    s = m[1].replace(" ", "")
    if len(s) in (4, 12):          # "029E" / "80AD000080AD": continuation count (parity bit) + id
        return (int(s[:2], 16) & 0x7F) + 1, int(s[2:4], 16) & 0x7F
    if len(s) == 16:               # "7F98000000000000": 0x7F continuation codes, then the id
        i = 0
        while s[i:i + 2] == "7F" and i < 14:
            i += 2
        return i // 2 + 1, int(s[i:i + 2], 16) & 0x7F
    return None


def module_vendor(manufacturer: str | None) -> tuple[str, bool] | None:
    """(vendor, sells XMP/EXPO kits) from the Manufacturer field (name or JEDEC id); None when unknown."""
    if not manufacturer or not isinstance(manufacturer, str):
        return None
    ident = jedec_id(manufacturer)
    for name, rated, pattern, ids in VENDORS:
        if (ident is not None and ident in ids) or (ident is None and pattern.search(manufacturer)):
            return name, rated
    return None


# Intel desktop chipsets without memory overclocking (100-400 series H/B/Q, H510, H610, H710): memory runs at most
# at the CPU's JEDEC maximum whatever the kit's XMP says
_LOCKED_CHIPSET = re.compile(r"(?<![A-Z0-9])([HBQ](?:110|150|170|250|270|310|360|365|370|410|460|470|510|610|710))(?=[A-Z\-\s/(]|$)")
def cpu_memory_limit(cpu_model: str | None, mem_type: str | None = None) -> tuple[int, str] | None:
    """(MT/s, "DDR4-2666") for CPUs whose memory controller caps memory speed with no way to raise it (mobile,
    embedded and server parts: tunehost/data/cpu_memory.csv, oc = no); None when unknown or overclockable."""
    cpu = cpu_memory(cpu_model)
    return cpu.max_for(mem_type) if cpu is not None and cpu.oc == "no" else None


def platform_memory_limit(cpu_model: str | None, board: str | None,
                          mem_type: str | None = None) -> tuple[int, str] | None:
    """(MT/s, why) when the CPU, or an Intel chipset without memory overclocking, caps memory speed; else None."""
    cpu = cpu_memory(cpu_model)
    if cpu is None:
        return None
    limit = cpu.max_for(mem_type)
    if limit is None:
        return None
    if cpu.oc == "no":
        return limit[0], f"the CPU ({cpu_model}) supports at most {limit[1]}"
    chipset = _LOCKED_CHIPSET.search((board or "").upper()) if isinstance(board, str) else None
    if cpu.oc == "chipset" and chipset is not None:
        return limit[0], (f"the board's Intel {chipset[1]} chipset allows no memory overclocking (no XMP), so memory "
                          f"runs at most at the CPU's {limit[1]} ({cpu_model})")
    return None


# DRAM component part numbers (a package on the board, not a module): Samsung K4.., SK hynix H5../H9.., Micron
# MT40/MT41/MT5x/MT6x, Nanya NT5.., CXMT CXDB..; firmware of soldered memory often reports them with Form Factor SODIMM
_DRAM_CHIP = re.compile(r"^(?:K4[A-Z][0-9A-Z]{6}|H5[A-Z]{2}[0-9A-Z]{5}|H9[A-Z]{3}[0-9A-Z]{4}|MT(?:4[01]|5[0-3]|6[0-2])[A-Z]\d"
                        r"|NT5[A-Z]{2}\d|CXDB\d)")


def is_dram_chip(part_number: str | None) -> bool:
    """True when the part number names a DRAM package (memory soldered on the board), not a module."""
    return bool(part_number) and isinstance(part_number, str) and bool(_DRAM_CHIP.match(part_number.strip().upper()))
