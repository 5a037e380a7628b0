"""Writes the cpu-clocks / power-limits fixture snapshots (tests/data/clocks/<name>/), each from one public report.

    .venv/bin/python -m tests.power.build_clock_fixtures      # regenerate after changing this file

Every fixture is named after the report it comes from; FIXTURES says where each value comes from. Values the
reporter posted are copied unchanged (watts stated as "9W" become 9000000 µW, the file's unit; "~2.42 GHz" becomes
2420 MHz). What a report does not give is left out of the snapshot (absent = unknown), except the CPU model's
published base/max clocks and core count, which the reporter named by model, and the topology layout Linux uses for
that CPU (tests/cpu/build_snapshots.machine). Each directory gets a SOURCE.md and expected.json
({check id: [severities]}).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import write_snapshot
from tests.cpu.build_snapshots import machine, topology_files

CLOCKS = Path(__file__).resolve().parents[1] / "data" / "clocks"
CPU = "/sys/devices/system/cpu"
POWERCAP = "/sys/class/powercap"


@dataclass(frozen=True)
class Fixture:
    name: str
    source: str                      # URL of the report, author and date
    notes: str                       # what was copied, from where in the report
    files: dict[str, str]
    expected: dict[str, list[str]]
    measure: dict | None = None
    commands: dict[str, str] = field(default_factory=dict)


def cpufreq(cpus: list[int], **values: str) -> dict[str, str]:
    """The same cpufreq files on every listed CPU (value None: the file is left out)."""
    files = {}
    for n in cpus:
        for name, value in values.items():
            if value is not None:
                files[f"{CPU}/cpu{n}/cpufreq/{name}"] = f"{value}\n"
    return files


def cpuinfo(cpus: list[int], vendor: str, model: str) -> dict[str, str]:
    blocks = [f"processor\t: {n}\nvendor_id\t: {vendor}\nmodel name\t: {model}\nflags\t\t: aperfmperf"
              for n in cpus]
    return {"/proc/cpuinfo": "\n\n".join(blocks) + "\n\n"}


def rapl_zone(path: str, name: str, constraints: list[tuple[str, int, int | None]], enabled: str = "1") -> dict:
    files = {f"{path}/name": f"{name}\n", f"{path}/enabled": f"{enabled}\n"}
    for k, (cname, limit, top) in enumerate(constraints):
        files[f"{path}/constraint_{k}_name"] = f"{cname}\n"
        files[f"{path}/constraint_{k}_power_limit_uw"] = f"{limit}\n"
        if top is not None:
            files[f"{path}/constraint_{k}_max_power_uw"] = f"{top}\n"
    return files


def all_cores_read(mhz: int, cores: int = 4) -> dict:
    """A measure.json of every core at `mhz` under an all-core load, as a tool reading scaling_cur_freq shows it."""
    return {"format": 1, "cpu_mhz_all": {str(n): mhz for n in range(cores)}, "cpu_mhz_source": "scaling_cur_freq"}


def laptop_cpu(cores: int, vendor: str, model: str, **freq: str) -> tuple[list[int], dict[str, str]]:
    cpus = machine(packages=1, cores_per_package=cores, smt=True, l3_cores=cores, l3_kb=[16384])
    ids = [c["cpu"] for c in cpus]
    files = {**topology_files(cpus), **cpuinfo(ids, vendor, model), **cpufreq(ids, **freq)}
    return ids, files


def framework16() -> Fixture:
    ids, files = laptop_cpu(8, "AuthenticAMD", "AMD Ryzen 9 7940HS w/ Radeon 780M Graphics",
                            scaling_driver="amd-pstate-epp", scaling_governor="performance",
                            energy_performance_preference="performance", scaling_max_freq="5263061")
    files[f"{CPU}/amd_pstate/status"] = "active\n"
    files[f"{CPU}/cpufreq/boost"] = "1\n"
    files["/sys/firmware/acpi/platform_profile"] = "performance\n"
    for n in ids:
        core = n % 8
        files[f"{CPU}/cpu{n}/acpi_cppc/highest_perf"] = ("232\n" if core in (2, 3) else "196\n")
        files[f"{CPU}/cpu{n}/acpi_cppc/lowest_perf"] = "15\n"
        files[f"{CPU}/cpu{n}/acpi_cppc/nominal_perf"] = "149\n"
        files[f"{CPU}/cpu{n}/acpi_cppc/nominal_freq"] = "4001\n"
    return Fixture(
        "framework16-7940hs-clamped-1ghz-after-resume",
        "https://github.com/FrameworkComputer/SoftwareFirmwareIssueTracker/issues/91 (comment by vadi2, 2026-08-28: "
        "Framework Laptop 16, Ryzen 9 7940HS, BIOS 04.05, kernel 6.17.0-35, amd-pstate-epp active)",
        "CPPC statics as posted: highest_perf 196 (232 on prefcore cpu2/3), lowest_perf 15, nominal_perf 149, "
        "nominal_freq 4001 MHz; scaling_max_freq 5263061 kHz; governor/EPP performance/performance; platform_profile "
        "performance; boost 1. Clamped state: delivered 964 - 1067 MHz on 16/16 cores under a 16-thread busy loop, "
        "read from acpi_cppc/feedback_ctrs. The report gives the range, not per-core figures: the fixture puts its low "
        "end (964) on CPU 0 and its high end (1067) on the other physical cores. 8 cores / 16 threads: AMD's spec.",
        files, {"cpu-clocks": ["fail"], "power-limits": ["ok"]},
        {"format": 1, "cpu_mhz_all": {str(n): (964 if n == 0 else 1067) for n in range(8)},
         "cpu_mhz_source": "cppc-feedback"})


def steamdeck(after_sleep: bool) -> Fixture:
    ids, files = laptop_cpu(4, "AuthenticAMD", "AMD Custom APU 0405", scaling_driver="amd-pstate-epp",
                            scaling_governor="powersave", energy_performance_preference="balance_performance",
                            scaling_max_freq="3501250")
    files[f"{CPU}/amd_pstate/status"] = "active\n"
    files[f"{CPU}/cpufreq/boost"] = "1\n"
    for n in ids:
        files[f"{CPU}/cpu{n}/acpi_cppc/highest_perf"] = "255\n"
        files[f"{CPU}/cpu{n}/acpi_cppc/nominal_perf"] = "204\n"
    mhz = 2420 if after_sleep else 3500
    name = ("steamdeck-lcd-boost-clamped-2.4ghz-after-resume" if after_sleep
            else "steamdeck-lcd-before-sleep-3.5ghz-healthy")
    return Fixture(
        name,
        "https://github.com/ValveSoftware/SteamOS/issues/2593 (godmarck, 2026-07-09: Steam Deck LCD, SteamOS 3.8.14, "
        "kernel 6.16.12-valve24.4, amd-pstate-epp active)",
        "A pinned single-core busy loop (`taskset -c 2 sh -c 'while :; do :; done'`) reaches 3.5 GHz before sleep and "
        "~2.42 GHz after resume; scaling_max_freq 3501250, boost 1, governor powersave, EPP balance_performance on all "
        "8 CPUs, CPPC highest_perf 255, nominal_perf 204. The report gives the nominal clock as 2.8 GHz (\"passive "
        "mode then caps at 2.8 GHz nominal\"): it is in no file the report shows, so the fixture has no nominal_freq "
        "and the model name has no \"@ GHz\"; the single-core judgement uses scaling_max_freq. 4 cores / 8 threads."
        + (" This fixture is the after-resume state." if after_sleep else " This fixture is the before-sleep state."),
        files, {"cpu-clocks": ["warn" if after_sleep else "ok"], "power-limits": ["skip"]},
        {"format": 1, "cpu_mhz_single": {"2": mhz}, "cpu_mhz_source": "scaling_cur_freq"})


def thinkpad_p14s() -> Fixture:
    ids, files = laptop_cpu(4, "GenuineIntel", "Intel(R) Core(TM) i7-10610U CPU @ 1.80GHz",
                            scaling_driver="intel_pstate", scaling_governor="performance",
                            cpuinfo_max_freq="4900000", scaling_max_freq="4900000", base_frequency="1800000")
    files[f"{CPU}/intel_pstate/status"] = "active\n"
    return Fixture(
        "thinkpad-p14s-gen1-i7-10610u-400mhz-ppd-performance",
        "https://github.com/JosiahBull/thinkpad_acpi/issues/13 (alex-kowalczyk, 2023-11-06: ThinkPad P14s Gen 1, "
        "i7-10610U, Ubuntu 23.04, kernel 6.2.0-35)",
        "On AC in performance mode the CPU goes down to 400 MHz (seen in s-tui, which reads scaling_cur_freq) while "
        "scaling_governor and powerprofilesctl both say performance (\"Degraded: no\"), temperatures 55-60 C. "
        "Base 1.8 GHz / max 4.9 GHz and 4 cores / 8 threads: Intel's i7-10610U spec.",
        files, {"cpu-clocks": ["fail"], "power-limits": ["skip"]},
        all_cores_read(400),
        {"powerprofilesctl get": "performance\n"})


def vostro_thermald() -> Fixture:
    ids, files = laptop_cpu(4, "GenuineIntel", "Intel(R) Core(TM) i5-1035G1 CPU @ 1.00GHz",
                            scaling_driver="intel_pstate", scaling_governor="powersave",
                            cpuinfo_max_freq="3600000", scaling_max_freq="3600000", base_frequency="1000000")
    files[f"{CPU}/intel_pstate/status"] = "active\n"
    files.update(rapl_zone(f"{POWERCAP}/intel-rapl:0", "package-0", [("long_term", 8750000, 15000000)]))
    return Fixture(
        "dell-vostro-3491-thermald-pl1-8.75w-of-15w",
        "https://github.com/intel/thermal_daemon/issues/228 (ettlz, 2020-05-16: Dell Vostro 3491, i5-1035G1)",
        "constraint-0 power limit 9 W by default with a max of 15 W; thermald's rapl_controller sets about 8.75 W "
        "(the fixture's constraint_0_power_limit_uw), and all cores at 100 % run around 1 GHz (cpu_mhz_all). "
        "Base 1.0 GHz / max 3.6 GHz, 4 cores / 8 threads: Intel's i5-1035G1 spec. The clock is at the (low) base "
        "clock, so cpu-clocks is ok; the power limit is what power-limits flags.",
        files, {"cpu-clocks": ["ok"], "power-limits": ["warn"]},
        all_cores_read(1000))


def xps13_9310() -> Fixture:
    _, files = laptop_cpu(4, "GenuineIntel", "11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz")
    return Fixture(
        "xps13-9310-i7-1165g7-2ghz-under-stress-71pct-of-base",
        "https://github.com/sebanc/brunch/issues/1591 (u9wy, 2022-07-20: Dell XPS 13 2-in-1 9310, i7-1165G7)",
        "\"Even if i run a CPU stress test the frequency doesn't go past 2GHz\" on an i7-1165G7 @ 2.80GHz, with the "
        "firmware's performance options and Turbo Boost enabled: all four cores at 2000 MHz (cpu_mhz_all; the "
        "reporter did not name the tool, recorded as scaling_cur_freq), 71 % of the 2.8 GHz base. Base 2.8 GHz "
        "(the model name) and 4 cores / 8 threads: Intel's i7-1165G7 spec. The report gives no power limit, "
        "temperature or profile, so the snapshot has none and the cause is unknown.",
        files, {"cpu-clocks": ["warn"], "power-limits": ["skip"]},
        all_cores_read(2000))


def strix_mmio() -> Fixture:
    files = rapl_zone(f"{POWERCAP}/intel-rapl:0", "package-0", [("long_term", 175000000, None)])
    files.update(rapl_zone(f"{POWERCAP}/intel-rapl-mmio:0", "package-0",
                           [("long_term", 45000000, None), ("short_term", 90000000, None)]))
    return Fixture(
        "asus-strix-g814jz-13980hx-mmio-45w-over-msr-175w",
        "https://github.com/OpenGamingCollective/asusctl/issues/145 (denisu14, 2026-06-30: ROG Strix G814JZ, "
        "i9-13980HX, kernel 7.0.12)",
        "intel-rapl-mmio:0 constraint_0/1_power_limit_uw stay at 45 W / 90 W whatever asusctl sets; the MSR zone "
        "(intel-rapl:0) reads 175 W. Writing the MMIO files lifted sustained power to ~95 W. The report names only "
        "these limits, so the snapshot holds only them (no max_power_uw, no cpufreq).",
        files, {"cpu-clocks": ["skip"], "power-limits": ["warn"]})


def surface_pro7() -> Fixture:
    files = rapl_zone(f"{POWERCAP}/intel-rapl:0", "package-0",
                      [("long_term", 25000000, 15000000), ("short_term", 61000000, 0)])
    return Fixture(
        "surface-pro-7-i5-1035g4-pl1-25w-above-15w-rated",
        "https://github.com/linux-surface/linux-surface/issues/221 (Adurol, 2020-07-29: Surface Pro 7, i5-1035G4)",
        "intel-rapl:0 (package-0): constraint_0 long_term power_limit 25000000 / max_power 15000000, constraint_1 "
        "short_term power_limit 61000000 / max_power 0. PL1 above the rated power is normal (OEMs raise it).",
        files, {"cpu-clocks": ["skip"], "power-limits": ["ok"]})


def profile(name: str, source: str, notes: str, current: str, choices: str | None, verdict: str) -> Fixture:
    files = {"/sys/firmware/acpi/platform_profile": f"{current}\n"}
    if choices is not None:
        files["/sys/firmware/acpi/platform_profile_choices"] = f"{choices}\n"
    return Fixture(name, source, notes, files, {"cpu-clocks": ["skip"], "power-limits": [verdict]})


FIXTURES = [
    framework16,
    lambda: steamdeck(True),
    lambda: steamdeck(False),
    thinkpad_p14s,
    vostro_thermald,
    xps13_9310,
    strix_mmio,
    surface_pro7,
    lambda: profile("laptop-mode-tools-212-platform-profile-balanced",
                    "https://github.com/rickysarraf/laptop-mode-tools/issues/212 (rickysarraf, 2025-02-10)",
                    "`cat /sys/firmware/acpi/platform_profile` -> balanced; `platform_profile_choices` -> "
                    "low-power balanced performance.", "balanced", "low-power balanced performance", "warn"),
    lambda: profile("powerstation-11-platform-profile-performance",
                    "https://github.com/ShadowBlip/PowerStation/issues/11 (pastaq, 2024-06-27)",
                    "After `echo performance | sudo tee platform_profile`: platform_profile -> performance; choices "
                    "-> low-power balanced performance.", "performance", "low-power balanced performance", "ok"),
    lambda: profile("tlp-709-thinkpad-t14s-gen4-platform-profile-low-power",
                    "https://github.com/linrunner/TLP/issues/709 (linrunner's reply, 2023-09-20: ThinkPad T14s Gen 4, "
                    "i7-1365U)",
                    "The reporter's tlp-stat shows `platform_profile` = low-power (with EPP power, no_turbo 1, "
                    "max_perf_pct 20). The choices were not posted: the snapshot has no choices file.",
                    "low-power", None, "warn"),
]


def write(fixture: Fixture, under: Path = CLOCKS) -> Path:
    root = under / fixture.name
    if root.exists():
        shutil.rmtree(root)
    write_snapshot(root, fs=fixture.files, cmd=fixture.commands,
                   samples={"measure": fixture.measure} if fixture.measure is not None else None,
                   manifest={"format": 1, "source": fixture.source})
    (root / "expected.json").write_text(json.dumps(fixture.expected, indent=1) + "\n")
    (root / "SOURCE.md").write_text(f"# {fixture.name}\n\nSource: {fixture.source}\n\n{fixture.notes}\n")
    return root


def main() -> None:
    for make in FIXTURES:
        print(write(make()))


if __name__ == "__main__":
    main()
