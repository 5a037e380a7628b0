"""hugetlb-pool against real /proc/meminfo data, through snapshot directories: nothing live is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.host import open_host

from tunehost_check_example.hugetlb_pool import HugetlbPoolCheck

DATA = Path(__file__).parent / "data"
XEON_POOL = DATA / "proc-meminfo-huge-xeon6980p-hugetlb-400000x2mb-reserved.txt"  # see data/README.md
NO_POOL = ("MemTotal:       32581876 kB\nHugePages_Total:       0\nHugePages_Free:        0\n"  # a 32 GB desktop
           "Hugepagesize:       2048 kB\n")


def snapshot(root: Path, meminfo: str | None) -> Path:
    """A format-1 snapshot (docs/snapshot.md): manifest.json, and the host's files under fs/."""
    (root / "fs" / "proc").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"format": 1}))
    if meminfo is not None:
        (root / "fs" / "proc" / "meminfo").write_text(meminfo)
    return root


def judge(root: Path):
    return list(HugetlbPoolCheck().run(HostFacts(open_host(root))))


def test_an_unused_781_gib_pool_is_a_warning_with_the_fix(tmp_path):
    [finding] = judge(snapshot(tmp_path / "s", XEON_POOL.read_text()))
    assert finding.severity is Severity.WARN
    assert finding.summary.startswith("781.2 GiB is reserved as static huge pages and 781.2 GiB of it is unused")
    assert finding.evidence["/proc/meminfo HugePages_Free"] == "400000"
    assert finding.fix.commands == ("sudo sysctl -w vm.nr_hugepages=0",)


def test_no_pool_is_ok(tmp_path):
    [finding] = judge(snapshot(tmp_path / "s", NO_POOL))
    assert finding.severity is Severity.OK


def test_a_small_pool_in_use_is_information(tmp_path):
    text = NO_POOL.replace("HugePages_Total:       0", "HugePages_Total:     512").replace(
        "HugePages_Free:        0", "HugePages_Free:        12")
    [finding] = judge(snapshot(tmp_path / "s", text))
    assert finding.severity is Severity.INFO and "1.0 GiB (3% of RAM)" in finding.summary


def test_what_cannot_be_read_is_a_skip_with_the_reason(tmp_path):
    [missing] = judge(snapshot(tmp_path / "a", None))
    [garbage] = judge(snapshot(tmp_path / "b", "HugePages_Total: lots\n\x1b[31mHugepagesize: -2048 kB\n"))
    assert missing.severity is Severity.SKIP and missing.summary == "cannot read /proc/meminfo"
    assert garbage.severity is Severity.SKIP and "no HugePages_Total" in garbage.summary


def test_doctor_runs_it_through_the_entry_point(tmp_path):
    snap = snapshot(tmp_path / "s", XEON_POOL.read_text())
    result = subprocess.run([sys.executable, "-m", "tunehost", "doctor", "--json", "--check", "hugetlb-pool",
                             "--snapshot", str(snap)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr  # a warning does not make the host not ready
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["check"] == "hugetlb-pool" and finding["severity"] == "warn"
