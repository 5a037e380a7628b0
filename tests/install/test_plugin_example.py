"""The example check package (examples/tunehost-check-example), pip-installed beside tunehost: its finding is in
`doctor --json`, its own tests pass, and a broken plugin is one warning while every other check still runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS
from tests.install.conftest import run_installed
from tunehost.doctor.registry import BUILTIN_ORDER

EXAMPLE_DATA = Path(__file__).resolve().parents[2] / "examples/tunehost-check-example/tests/data"
XEON_POOL = EXAMPLE_DATA / "proc-meminfo-huge-xeon6980p-hugetlb-400000x2mb-reserved.txt"

pytestmark = pytest.mark.install



def doctor_json(venv_bin, snapshot, cwd, pythonpath=None):
    result = run_installed(venv_bin, "doctor", "--json", "--snapshot", str(snapshot), cwd=cwd, pythonpath=pythonpath)
    assert result.returncode in (0, 2), result.stderr
    return json.loads(result.stdout), result.stderr


def test_the_example_finding_is_in_doctor_json(venv_bin, tmp_path):
    doc, stderr = doctor_json(venv_bin, SNAPSHOTS / "ci-vm", tmp_path)
    [finding] = [f for f in doc["findings"] if f["check"] == "hugetlb-pool"]
    assert finding["severity"] == "ok" and finding["summary"] == "no RAM is reserved as static huge pages"
    assert finding["evidence"]["/proc/meminfo HugePages_Total"] == "0"
    assert doc["findings"][-1]["check"] == "hugetlb-pool"  # third-party checks follow the built-in ones
    assert stderr == ""


def test_the_example_judges_a_real_unused_pool(venv_bin, tmp_path):
    snap = tmp_path / "xeon"
    (snap / "fs" / "proc").mkdir(parents=True)
    (snap / "manifest.json").write_text('{"format": 1}')
    (snap / "fs" / "proc" / "meminfo").write_text(XEON_POOL.read_text())
    doc, _ = doctor_json(venv_bin, snap, tmp_path)
    [finding] = [f for f in doc["findings"] if f["check"] == "hugetlb-pool"]
    assert finding["severity"] == "warn" and "781.2 GiB" in finding["summary"]
    assert finding["fix"]["commands"] == ["sudo sysctl -w vm.nr_hugepages=0"]


def test_the_examples_own_tests_pass(venv_bin, example_src):
    result = subprocess.run([str(venv_bin / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            capture_output=True, text=True, cwd=example_src, timeout=300,
                            env={"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


BROKEN_PLUGINS = {
    "raises-on-import": "tunehost_broken_plugin.raises:Whatever",
    "not-a-check": "tunehost_broken_plugin.notcheck:NotACheck",
}


def broken_distribution(root: Path) -> Path:
    """An installed distribution (a .dist-info with entry_points.txt on sys.path, as pip leaves it) whose two
    tunehost.checks entry points are broken: one module raises on import, one names a class that is not a Check."""
    pkg = root / "tunehost_broken_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "raises.py").write_text("raise RuntimeError('this plugin is broken on purpose')\n")
    (pkg / "notcheck.py").write_text("class NotACheck:\n    id = 'not-a-check'\n")
    info = root / "tunehost_broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tunehost-broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[tunehost.checks]\n" + "".join(f"{name} = {target}\n" for name, target in BROKEN_PLUGINS.items()))
    return root


def test_a_broken_plugin_is_one_warning_line_and_the_other_checks_run(venv_bin, tmp_path):
    plugins = broken_distribution(tmp_path / "site")
    doc, stderr = doctor_json(venv_bin, SNAPSHOTS / "ci-vm", tmp_path, pythonpath=plugins)
    lines = stderr.splitlines()
    assert len(lines) == len(BROKEN_PLUGINS), stderr  # one line per broken plugin, no traceback
    for line, name in zip(sorted(lines), sorted(BROKEN_PLUGINS)):
        assert line.startswith(f"tunehost: warning: check plugin '{name}' ("), line
    assert any("RuntimeError: this plugin is broken on purpose" in line for line in lines)
    assert any("is not a tunehost Check" in line for line in lines)
    ran = {f["check"] for f in doc["findings"]}
    assert set(BUILTIN_ORDER) | {"hugetlb-pool"} <= ran
    assert not ran & set(BROKEN_PLUGINS)
