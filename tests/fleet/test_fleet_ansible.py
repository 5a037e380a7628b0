"""The Ansible role for real: ansible-playbook (ansible-core from the test extra) against three hosts on this machine
(local connection), each host's doctor pointed at a different snapshot, then `tunehost fleet` over what it fetched.

One host runs the role's install task for real: the role builds a wheel of this checkout on the controller, checks
its sha256 on the host and pip-installs that file (--no-index --no-deps; the dependencies from the index) into a fresh
virtualenv (about a minute on 2 cores); the other two use this test run's own tunehost (tunehost_install: false) to
keep the test short. The refusals (a package name, another project's wheel, a wrong sha256) run the role again on
one host and fail before anything is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS
from tests.fleet.conftest import FLEET_SNAPSHOTS, worst_per_check

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "ansible" / "playbook.yml"
HOSTS = {"box-ci": "ci-vm", "box-desktop": "desktop-12700f-rtx3060", "box-laptop": "laptop-5800u-apu"}
# not the play's first host: the wheel is built once (run_once) by the first host that installs, for all of them
INSTALLING_HOST = "box-laptop"
LABELS = {"fail": "FAIL", "error": "ERROR", "warn": "WARN", "info": "info", "skip": "skip", "ok": "ok"}


def _bin(name: str) -> str | None:
    beside = Path(sys.executable).parent / name  # the venv running the tests, even when it is not on PATH
    return str(beside) if beside.exists() else shutil.which(name)


def _run_playbook(work: Path, hosts: dict, group_vars: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    """ansible-playbook with the repository's playbook, these hosts (local connection) and variables."""
    ansible_playbook = _bin("ansible-playbook")
    if ansible_playbook is None:
        pytest.skip("ansible-playbook is not installed: pip install -e '.[test]' installs ansible-core")
    inventory = {"all": {"children": {"tunehost": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, **group_vars}}}}}
    (work / "inventory.yml").write_text(json.dumps(inventory))  # JSON is YAML
    (work / "ansible.cfg").write_text("[defaults]\nretry_files_enabled = False\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(work / "ansible.cfg"), "ANSIBLE_HOME": str(work / "ansible-home"),
           "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"), "ANSIBLE_REMOTE_TEMP": str(work / "ansible-remote"),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run([ansible_playbook, "-i", str(work / "inventory.yml"), str(PLAYBOOK)],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.fixture(scope="module")
def playbook_run(tmp_path_factory):
    """Run the playbook once; returns (completed process, fleet dir, work dir)."""
    assert sorted(HOSTS.values()) == sorted(FLEET_SNAPSHOTS)
    tunehost = _bin("tunehost")
    assert tunehost is not None, "tunehost is not installed in the test environment"
    work = tmp_path_factory.mktemp("ansible")
    fleet_dir = work / "fleet"
    hosts = {name: {"tunehost_doctor_args": ["--snapshot", str(SNAPSHOTS / snap)],
                    "tunehost_install": False, "tunehost_bin": tunehost} for name, snap in HOSTS.items()}
    hosts[INSTALLING_HOST] |= {
        "tunehost_install": True, "tunehost_python": sys.executable,  # the wheel: built by the role from ROOT
        "tunehost_venv": str(work / "venv"), "tunehost_bin": str(work / "venv" / "bin" / "tunehost"),
        "tunehost_snapshot": True,  # `tunehost snapshot --quick` of this machine, fetched as a tarball
    }
    proc = _run_playbook(work, hosts, {"tunehost_fleet_dir": str(fleet_dir), "tunehost_fleet_command": tunehost,
                                       "tunehost_controller_python": sys.executable})
    return proc, fleet_dir, work


def test_playbook_succeeds_and_fetches_a_report_per_host(playbook_run, doctor_reports):
    proc, fleet_dir, work = playbook_run
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    for host, snap in HOSTS.items():
        fetched = json.loads((fleet_dir / host / "doctor.json").read_text())
        assert fetched["snapshot"] == str(SNAPSHOTS / snap)
        assert [(f["check"], f["severity"]) for f in fetched["findings"]] == \
            [(f["check"], f["severity"]) for f in doctor_reports[snap]["findings"]]


def test_install_task_installed_a_working_tunehost(playbook_run):
    proc, _, work = playbook_run
    assert proc.returncode == 0, proc.stdout[-6000:]
    installed = work / "venv" / "bin" / "tunehost"
    version = subprocess.run([str(installed), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("tunehost ")
    # the distribution is tunehost-llama; no distribution named `tunehost` (PyPI's is another project's) is there
    show = subprocess.run([str(work / "venv" / "bin" / "python"), "-I", "-c",
                           "import importlib.metadata as m, json; "
                           "print(json.dumps(sorted(d.metadata['Name'].lower().replace('_', '-') for d in m.distributions())))"],
                          capture_output=True, text=True, timeout=60, cwd=work)
    assert show.returncode == 0, show.stderr
    names = json.loads(show.stdout)
    assert "tunehost-llama" in names and "tunehost" not in names
    for line in ("Install the wheel file (--no-index --no-deps)", "Check the sha256 of the wheel on the host"):
        assert line in proc.stdout
    assert not list(Path(work / "ansible-tmp").glob("**/*.whl"))


def _fake_wheel(path: Path, name: str) -> Path:
    """A file shaped like a wheel of `name` (never installed: each test fails before pip runs)."""
    with zipfile.ZipFile(path, "w") as wheel:
        dist = path.name.split("-")[0] + "-" + path.name.split("-")[1] + ".dist-info"
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n"
                                           "Requires-Dist: psutil>=5.9\n")
        wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\n")
    return path


@pytest.mark.parametrize("variables, says", [
    ({"tunehost_package": "tunehost"}, "never a name from a package index"),
    ({"tunehost_wheel": "tunehost==1.0.0"}, "never a name from a package index"),
    ({"tunehost_wheel": "WORK/tunehost-1.0.0-py3-none-any.whl"}, "is a wheel of 'tunehost', not of tunehost-llama"),
    ({"tunehost_wheel": "WORK/tunehost_llama-0.1.0-py3-none-any.whl", "tunehost_wheel_sha256": "0" * 64},
     "nothing installed"),
], ids=["package-name", "requirement-as-wheel", "another-projects-wheel", "wrong-sha256"])
def test_role_refuses_anything_but_a_checked_wheel_before_installing(tmp_path, variables, says):
    _fake_wheel(tmp_path / "tunehost-1.0.0-py3-none-any.whl", "tunehost")
    _fake_wheel(tmp_path / "tunehost_llama-0.1.0-py3-none-any.whl", "tunehost-llama")
    variables = {k: v.replace("WORK", str(tmp_path)) for k, v in variables.items()}
    venv = tmp_path / "venv"
    hosts = {"box": {"tunehost_python": sys.executable, "tunehost_venv": str(venv), **variables,
                     "tunehost_doctor_args": ["--snapshot", str(SNAPSHOTS / "ci-vm")]}}
    proc = _run_playbook(tmp_path, hosts, {"tunehost_fleet_dir": str(tmp_path / "fleet"), "tunehost_fleet_run": False,
                                           "tunehost_controller_python": sys.executable}, timeout=300)
    assert proc.returncode != 0
    assert says in proc.stdout + proc.stderr, proc.stdout[-4000:]
    assert not venv.exists()  # nothing installed: not even the virtualenv was created
    assert not (tmp_path / "fleet" / "box" / "doctor.json").exists()
    if "tunehost_wheel_sha256" in variables:  # the copy reached the host; its check stopped the install there
        assert "Check the sha256 of the wheel on the host" in proc.stdout
        assert "Copy the wheel to the host" in proc.stdout


def test_snapshot_is_fetched_as_a_tarball(playbook_run):
    proc, fleet_dir, _ = playbook_run
    assert proc.returncode == 0, proc.stdout[-6000:]
    with tarfile.open(fleet_dir / INSTALLING_HOST / "snapshot.tar.gz") as tar:
        manifest = json.load(tar.extractfile("snapshot/manifest.json"))
    assert manifest["format"] == 1
    assert not (fleet_dir / "box-desktop" / "snapshot.tar.gz").exists()


def test_fleet_json_cells_match_each_snapshots_own_doctor_report(playbook_run, doctor_reports, cli):
    _, fleet_dir, _ = playbook_run
    result = cli("fleet", "--json", str(fleet_dir))
    assert result.exit_code == 2, result.output  # the desktop and the laptop are not ready
    hosts = {h["host"]: h for h in json.loads(result.stdout)["hosts"]}
    assert sorted(hosts) == sorted(HOSTS)
    for host, snap in HOSTS.items():
        own = doctor_reports[snap]
        assert {c: cell["severity"] for c, cell in hosts[host]["cells"].items()} == worst_per_check(own), host
        assert hosts[host]["status"] == own["verdict"], host
    assert {hosts[h]["status"] for h in HOSTS} == {"ready", "not-ready"}  # the table shows different verdicts


def test_playbook_shows_the_fleet_table(playbook_run, doctor_reports):
    proc, _, _ = playbook_run
    assert proc.returncode == 0, proc.stdout[-6000:]
    # the debug task prints the table's lines as a JSON list of strings
    rows = [json.loads(line.strip().rstrip(",")).rstrip() for line in proc.stdout.splitlines()
            if line.strip().startswith('"') and line.strip().rstrip(",").endswith('"')]
    header = next(r for r in rows if r.startswith("check "))
    names = header.split()[1:]
    assert sorted(names) == sorted(HOSTS)
    for check in worst_per_check(doctor_reports["ci-vm"]):
        row = next(r for r in rows if r.split()[:1] == [check]).split()
        expected = [LABELS[worst_per_check(doctor_reports[HOSTS[n]])[check]] for n in names]
        assert row[1:] == expected, check
    assert rows[-1].startswith("not-ready")
