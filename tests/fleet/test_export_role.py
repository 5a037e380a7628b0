"""The role's Prometheus and local-fact options for real (issue 35 §2): ansible-playbook against this machine (local
connection, the test run's own tunehost, doctor and export on a snapshot) writes node_exporter's textfile, the
timer and service (checked by systemd-analyze verify) and the doctor report as an Ansible local fact; the unit
files go to a directory of the test and the timer is not started (no system manager is touched)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import SNAPSHOTS
from tests.fleet.test_fleet_ansible import _bin, _run_playbook

SNAPSHOT = SNAPSHOTS / "desktop-12700f-rtx3060"


@pytest.fixture(scope="module")
def role_run(tmp_path_factory):
    tunehost = _bin("tunehost")
    assert tunehost is not None, "tunehost is not installed in the test environment"
    work = tmp_path_factory.mktemp("export-role")
    dirs = {name: work / name for name in ("textfile", "units", "facts")}
    hosts = {"box": {"tunehost_install": False, "tunehost_bin": tunehost,
                     "tunehost_doctor_args": ["--snapshot", str(SNAPSHOT)],
                     "tunehost_textfile": True, "tunehost_textfile_dir": str(dirs["textfile"]),
                     "tunehost_textfile_args": ["--snapshot", str(SNAPSHOT)],
                     "tunehost_systemd_dir": str(dirs["units"]), "tunehost_textfile_timer_start": False,
                     "tunehost_local_fact": True, "tunehost_facts_dir": str(dirs["facts"])}}
    dirs["units"].mkdir()
    proc = _run_playbook(work, hosts, {"tunehost_fleet_dir": str(work / "fleet"), "tunehost_fleet_run": False},
                         timeout=300)
    return proc, dirs


def test_the_role_writes_the_textfile_the_units_and_the_fact(role_run, cli):
    parser = pytest.importorskip("prometheus_client.parser")
    proc, dirs = role_run
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert os.listdir(dirs["textfile"]) == ["tunehost.prom"]
    names = {f.name for f in parser.text_string_to_metric_families((dirs["textfile"] / "tunehost.prom").read_text())}
    assert {"tunehost_doctor_ready", "tunehost_check_status", "tunehost_ram_configured_transfers_per_second"} <= names
    fact = json.loads((dirs["facts"] / "tunehost.fact").read_text())
    doctor = json.loads(cli("doctor", "--json", "--snapshot", str(SNAPSHOT)).stdout)
    assert fact["verdict"] == doctor["verdict"] and fact["findings"] == doctor["findings"]
    assert (dirs["facts"] / "tunehost.fact").stat().st_mode & 0o111 == 0  # an executable .fact would be run
    assert sorted(os.listdir(dirs["units"])) == ["tunehost-export.service", "tunehost-export.timer"]
    service = (dirs["units"] / "tunehost-export.service").read_text()
    assert f"--textfile {dirs['textfile']} --snapshot {SNAPSHOT}" in service and "Type=oneshot" in service
    timer = (dirs["units"] / "tunehost-export.timer").read_text()
    assert "OnUnitActiveSec=15min" in timer and "WantedBy=timers.target" in timer


def test_the_units_pass_systemd_analyze_verify(role_run, tmp_path):
    proc, dirs = role_run
    assert proc.returncode == 0, proc.stdout[-6000:]
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the role's files were still checked above)")
    units = [str(dirs["units"] / n) for n in ("tunehost-export.service", "tunehost-export.timer")]
    done = subprocess.run([analyze, "verify", *units], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, SYSTEMD_LOG_LEVEL="warning"))
    if done.returncode != 0 and "Failed to initialize manager" in done.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    for unit in units:  # verify exits 0 on unknown keys too: any complaint about our files is a failure
        assert unit not in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("variables, says", [
    ({"tunehost_textfile_dir": "/var/lib/node exporter"}, "absolute paths of letters"),
    ({"tunehost_textfile_args": ["--quick; rm -rf /"]}, "plain words"),
    ({"tunehost_textfile_interval": "15 minutes"}, "systemd time span"),
    # redteam1: `$` matched before a final newline, so a word ending in one passed and the next word began a new
    # unit line (`ExecStartPre=...`); the checks end at \Z
    ({"tunehost_textfile_args": ["--quick\n", "ExecStartPre=/bin/touch", "/tmp/pwned"]}, "plain words"),
    ({"tunehost_textfile_dir": "/var/lib/node-exporter\n"}, "absolute paths of letters"),
    ({"tunehost_textfile_interval": "15min\n"}, "systemd time span"),
])
def test_the_role_refuses_what_a_unit_line_cannot_carry(tmp_path, variables, says):
    tunehost = _bin("tunehost")
    hosts = {"box": {"tunehost_install": False, "tunehost_bin": tunehost, "tunehost_textfile": True,
                     "tunehost_doctor_args": ["--snapshot", str(SNAPSHOT)],
                     "tunehost_systemd_dir": str(tmp_path / "units"), "tunehost_textfile_timer_start": False,
                     **variables}}
    proc = _run_playbook(tmp_path, hosts, {"tunehost_fleet_dir": str(tmp_path / "fleet"), "tunehost_fleet_run": False},
                         timeout=300)
    assert proc.returncode != 0 and says in proc.stdout + proc.stderr, proc.stdout[-4000:]
    assert not (tmp_path / "units").exists()
