"""The snapshot reader takes any tree: a real snapshot (ci-vm) or an empty one, with files replaced by garbage bytes,
hostile numbers ("0-999999" CPUs, swappiness -999999999999999999, MemAvailable above MemTotal), random JSON samples,
symlinks (out of the snapshot, to /proc/self/environ, loops, to directories), and a hostile manifest. `tunehost doctor
--snapshot` run through the CLI in-process ends in a report (exit 0 or 2, every finding judged, none an `error`)
or in one line and exit 1 — never a traceback, never a hang."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SNAPSHOTS
from tests.fuzz.profiles import budget, time_limit
from tests.fuzz.strategies import HOSTILE_NUMBERS, HOSTILE_TEXT

# files the facts read, by host path (SNAPSHOT.md, docs/snapshot.md): where hostile content does the most harm
FS_PATHS = [
    "proc/meminfo", "proc/swaps", "proc/sys/vm/swappiness", "proc/cpuinfo", "proc/vmstat",
    "sys/devices/system/cpu/online", "sys/devices/system/cpu/isolated", "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "sys/devices/system/cpu/cpu0/cpufreq/scaling_driver",
    "sys/devices/system/cpu/cpu0/cpufreq/energy_performance_preference",
    "sys/devices/system/cpu/cpu0/cpufreq/base_frequency", "sys/devices/system/cpu/cpu0/cpu_capacity",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "sys/devices/system/cpu/cpu0/topology/core_id",
    "sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list", "sys/devices/system/cpu/cpu0/cache/index3/size",
    "sys/devices/system/cpu/cpu0/acpi_cppc/feedback_ctrs", "sys/devices/system/cpu/cpu0/acpi_cppc/nominal_freq",
    "sys/devices/system/cpu/cpufreq/boost", "sys/devices/system/cpu/intel_pstate/no_turbo",
    "sys/devices/cpu_core/cpus", "sys/devices/cpu_atom/cpus",
    "sys/kernel/mm/transparent_hugepage/enabled", "sys/kernel/mm/transparent_hugepage/defrag",
    "sys/devices/system/node/node0/cpulist", "sys/devices/system/node/node1/cpulist",
    "sys/devices/system/node/node0/meminfo", "sys/devices/system/node/node0/distance",
    "sys/firmware/acpi/platform_profile", "sys/firmware/acpi/platform_profile_choices",
    "sys/class/powercap/intel-rapl:0/name", "sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw",
    "sys/class/powercap/intel-rapl:0/constraint_0_name", "sys/class/powercap/intel-rapl:0/enabled",
    "sys/block/zram0/mm_stat", "sys/block/zram0/disksize", "sys/block/zram0/comp_algorithm",
    "run/udev/data/+dmi:id", "proc/4242/fdinfo/7", "proc/4242/comm", "sys/class/drm/card0-HDMI-A-1/status",
    "sys/class/drm/card0/device/vendor", "sys/class/drm/card0/device/current_link_speed",
    "sys/class/hwmon/hwmon0/name", "sys/class/hwmon/hwmon0/temp1_input", "sys/class/thermal/thermal_zone0/temp",
    "sys/class/dmi/id/chassis_type",
]
CMD_NAMES = ["dmidecode_-t_memory", "nvidia-smi_-q", "nvidia-smi_-q_-x", "powerprofilesctl_get", "tuned-adm_active",
             "systemctl_get-default", "sensors", "lscpu"]
SAMPLE_NAMES = ["activity", "processes", "listeners", "measure", "nvml", "llama_install", "which"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
hostile_numbers = st.sampled_from(HOSTILE_NUMBERS).map(lambda n: float(n) if n in ("nan", "inf", "-inf") else n)
structured_samples = {
    "activity": st.fixed_dictionaries({}, optional={
        "interval_s": json_values | st.sampled_from([-1, 0, float("nan"), 1e300, True]),
        "vmstat_delta": st.dictionaries(st.sampled_from(["pswpin", "pswpout", "pgmajfault"]),
                                        st.integers(-(2**70), 2**70) | json_values, max_size=3),
        "cpu_count": json_values | st.sampled_from([0, -4, 10**20, float("inf")]),
        "cpu_percent_total": json_values | st.sampled_from([-50.0, float("nan"), 1e308]),
        "processes": st.lists(st.fixed_dictionaries({"pid": st.integers(-5, 2**40) | json_values,
                                                     "name": st.text(max_size=10) | st.sampled_from(HOSTILE_TEXT),
                                                     "cpu_percent": st.floats() | json_values}), max_size=3)}),
    "measure": st.fixed_dictionaries({"format": st.sampled_from([1, True, 1.0, "1"])}, optional={
        "memory_read_gbps": st.floats() | json_values, "memory_read_threads": json_values,
        "cpu_mhz_single": st.dictionaries(st.text(max_size=6), st.floats() | json_values, max_size=3),
        "cpu_mhz_all": st.dictionaries(st.sampled_from(["0", "1", "99999999999"]), st.floats(), max_size=3)}),
}


@st.composite
def file_content(draw) -> bytes:
    kind = draw(st.sampled_from(["number", "text", "bytes", "list", "empty"]))
    if kind == "number":
        return (draw(st.sampled_from(HOSTILE_NUMBERS + ["-999999999999999999", "10000000000"])) + "\n").encode()
    if kind == "list":
        return draw(st.sampled_from(["0-999999\n", "0-100000000\n", "0-8191\n", "5-2\n", "0,,1\n", "[always]\n",
                                     "MemTotal: 100 kB\nMemAvailable: 10000 kB\n", "a [b] c\n"])).encode()
    if kind == "text":
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    return b""


@st.composite
def snapshot_tree(draw) -> dict[str, Any]:
    """A recipe: the base, files to write, links to make, files to delete, and the manifest."""
    return {
        "base": draw(st.sampled_from(["ci-vm", None])),
        "files": draw(st.dictionaries(
            st.sampled_from([f"fs/{p}" for p in FS_PATHS] + [f"cmd/{c}" for c in CMD_NAMES]
                            + [f"cmd/{c}.rc" for c in CMD_NAMES]),
            file_content(), max_size=8)),
        "samples": draw(st.dictionaries(st.sampled_from(SAMPLE_NAMES),
                                        st.one_of(json_values, *structured_samples.values()), max_size=3)),
        "raw_samples": draw(st.dictionaries(st.sampled_from(SAMPLE_NAMES), st.binary(max_size=40), max_size=1)),
        "links": draw(st.dictionaries(
            st.sampled_from([f"fs/{p}" for p in FS_PATHS[:12]] + ["cmd/dmidecode_-t_memory", "samples/activity.json",
                                                                  "fs/sys/devices/system/cpu/cpu1"]),
            st.sampled_from(["OUTSIDE", "/proc/self/environ", "/etc/hostname", "..", ".", "loop", "/", "missing",
                             "../../../../../../../../etc/passwd"]), max_size=3)),
        "delete": draw(st.lists(st.sampled_from(FS_PATHS[:10]), max_size=3)),
        "manifest": draw(st.sampled_from([{"format": 1}, {"format": 1, "uid": 0}, {"format": 1, "uid": 1000},
                                          {"format": True}, {"format": 1.0}, {"format": 2}, {"format": 1, "uid": -1},
                                          {"format": 1, "created": 5}, "[]", "{", "null"])),
    }


def _build(root: Path, recipe: dict[str, Any], outside: Path) -> Path:
    snap = root / "snap"
    if snap.exists() or snap.is_symlink():
        shutil.rmtree(snap)
    if recipe["base"]:
        shutil.copytree(SNAPSHOTS / recipe["base"], snap, symlinks=True)
    else:
        snap.mkdir()
    manifest = recipe["manifest"]
    (snap / "manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    for rel in recipe["delete"]:
        target = snap / "fs" / rel
        if target.is_file():
            target.unlink()
    for rel, data in recipe["files"].items():
        target = snap / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        target.write_bytes(data)
    (snap / "samples").mkdir(exist_ok=True)
    for name, value in recipe["samples"].items():
        (snap / "samples" / f"{name}.json").write_text(json.dumps(value))
    for name, data in recipe["raw_samples"].items():
        (snap / "samples" / f"{name}.json").write_bytes(data)
    for rel, where in recipe["links"].items():
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        elif link.exists() or link.is_symlink():
            link.unlink()
        target = {"OUTSIDE": str(outside), "loop": link.name, "missing": "no-such-file"}.get(where, where)
        os.symlink(target, link)
    return snap


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside every generated snapshot: no report may ever contain its text."""
    secret = tmp_path / "outside-secret"
    secret.write_text("CANARY-7f3a outside the snapshot\n")
    return secret


def _doctor(cli, snap: Path) -> Any:
    return cli("doctor", "--snapshot", str(snap), "--json")


def _assert_documented_outcome(result: Any) -> None:
    """A report (exit 0/2) whose findings are all judged, or one error line and exit 1."""
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"traceback: {exc!r}"
    assert "Traceback" not in result.output
    if result.exit_code == 1:
        lines = result.stderr.strip().split("\n")  # what a terminal shows as lines
        assert len(lines) == 1 and lines[0].startswith("tunehost: error: "), result.stderr
        assert "\x1b" not in result.stderr
        return
    assert result.exit_code in (0, 2), (result.exit_code, result.stderr)
    report = json.loads(result.stdout)
    broken = [(f["check"], f["summary"]) for f in report["findings"] if f["severity"] == "error"]
    assert not broken, broken


@settings(budget(ci=12, long=600))
@given(recipe=snapshot_tree())
def test_doctor_reads_any_snapshot_tree(tmp_path: Path, cli, outside: Path, recipe: dict[str, Any]) -> None:
    snap = _build(tmp_path, recipe, outside)
    with time_limit("snapshot doctor"):
        result = _doctor(cli, snap)
    _assert_documented_outcome(result)


@pytest.mark.parametrize("link", ["cmd/dmidecode_-t_memory", "samples/activity.json",
                                  "fs/proc/meminfo", "fs/sys/devices/system/cpu/online"])
def test_no_report_shows_a_file_outside_the_snapshot(tmp_path: Path, cli, outside: Path, link: str) -> None:
    recipe = {"base": "ci-vm", "files": {}, "samples": {}, "raw_samples": {}, "delete": [], "manifest": {"format": 1},
              "links": {link: "OUTSIDE"}}
    snap = _build(tmp_path, recipe, outside)
    with time_limit("snapshot containment"):
        result = cli("doctor", "--snapshot", str(snap), "--json", "--verbose")
    assert "CANARY-7f3a" not in result.output


@pytest.mark.parametrize("online", ["0-999999", "0-100000000", "0-18446744073709551615", "9" * 5000])
def test_unbounded_online_cpu_list_is_a_skip_with_reason(make_snapshot, cli, online: str) -> None:
    snap = make_snapshot(fs={"/sys/devices/system/cpu/online": online + "\n"})
    with time_limit("snapshot cpu/online"):
        result = cli("doctor", "--snapshot", str(snap), "--json", "--check", "cpu-governor")
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["severity"] == "skip" and "online" in finding["summary"]


@pytest.mark.parametrize("files, summary", [
    ({"/proc/sys/vm/swappiness": "-999999999999999999\n", "/proc/meminfo": "MemTotal: 100 kB\nSwapTotal: 10 kB\n"
      "SwapFree: 5 kB\nMemAvailable: 50 kB\n"}, "not a swappiness the kernel allows"),
    ({"/proc/meminfo": "MemTotal: 100 kB\nMemAvailable: 10000 kB\n"}, "cannot both be true"),
])
def test_impossible_memory_values_are_skips(make_snapshot, cli, files: dict[str, str], summary: str) -> None:
    snap = make_snapshot(fs=files)
    result = cli("doctor", "--snapshot", str(snap), "--json", "--check", "swap")
    findings = json.loads(result.stdout)["findings"]
    assert any(f["severity"] == "skip" and summary in f["summary"] for f in findings), findings
    assert not any("%" in f["summary"] and "10000" in f["summary"] for f in findings)


@pytest.mark.parametrize("sample", [{"interval_s": -1, "vmstat_delta": {"pswpin": 0, "pswpout": 0}},
                                    {"interval_s": 0.5, "vmstat_delta": {"pswpin": -3, "pswpout": 0}}])
def test_impossible_activity_sample_is_a_skip(make_snapshot, cli, sample: dict[str, Any]) -> None:
    snap = make_snapshot(fs={"/proc/meminfo": "MemTotal: 100 kB\nSwapTotal: 10 kB\nSwapFree: 5 kB\n"
                                              "MemAvailable: 50 kB\n"}, samples={"activity": sample})
    result = cli("doctor", "--snapshot", str(snap), "--json", "--check", "swap")
    findings = json.loads(result.stdout)["findings"]
    assert any(f["severity"] == "skip" and "activity sample" in f["summary"] for f in findings), findings
    assert not any("-1 s" in f["summary"] for f in findings)


@pytest.mark.parametrize("manifest", ['{"format": true}', '{"format": 1.0}', '{"format": "1"}', '{"format": 1, '
                                      '"uid": false}', '{"format": 1, "hostname": 7}', '[' * 100_000])
def test_manifest_is_strict(tmp_path: Path, cli, manifest: str) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "manifest.json").write_text(manifest)
    result = cli("doctor", "--snapshot", str(snap))
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
