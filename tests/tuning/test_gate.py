"""The pre-benchmark gate: quiet detection (pure, injected clock), host summary, and scripts/gate's exit statuses."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

import pytest

from tunehost.host import open_host
from tunehost.tuning.gate import QuietReading, host_summary, max_temperature, wait_quiet, why_not_quiet

GATE = Path(__file__).resolve().parents[2] / "scripts" / "gate"


def test_why_not_quiet():
    hot = QuietReading((("stress-ng", 99.0),), 60.0)
    assert why_not_quiet(None, hot) == "busy: stress-ng 99%"
    first = QuietReading((), 60.0)
    assert "one reading" in why_not_quiet(None, first)
    assert "still moving (60.0 -> 65.0" in why_not_quiet(first, QuietReading((), 65.0))
    assert why_not_quiet(first, QuietReading((), 61.0)) is None
    assert why_not_quiet(None, QuietReading((), None)) is None  # no sensors: only CPU use counts


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_wait_quiet_settles():
    readings = iter([QuietReading((("make", 180.0),), 70.0), QuietReading((), 66.0), QuietReading((), 65.5)])
    clock = FakeClock()
    result = wait_quiet(lambda: next(readings), 60, interval_s=2, clock=clock, sleep=clock.sleep)
    assert result.quiet and result.waited_s == 4 and len(result.readings) == 3


def test_wait_quiet_is_bounded():
    clock = FakeClock()
    result = wait_quiet(lambda: QuietReading((("make", 180.0),), None), 10, interval_s=2, clock=clock,
                        sleep=clock.sleep)
    assert not result.quiet and result.reason == "busy: make 180%" and clock.now <= 10


def test_temperatures_and_summary_from_a_snapshot(make_snapshot):
    snap = make_snapshot(fs={
        "/sys/class/hwmon/hwmon0/temp1_input": "45000\n", "/sys/class/hwmon/hwmon0/temp2_input": "-\n",
        "/sys/class/thermal/thermal_zone0/temp": "52500\n",
        "/sys/devices/system/cpu/online": "0-1\n",
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
        "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance\n",
        "/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
        "/proc/sys/vm/swappiness": "10\n", "/proc/sys/kernel/osrelease": "6.8.0\n",
        "/proc/cpuinfo": "processor\t: 0\nmodel name\t: AMD Ryzen 9 7950X 16-Core Processor\n",
    })
    host = open_host(snap)
    assert max_temperature(host) == 52.5
    summary = host_summary(host)
    assert summary["cpu_model"] == "AMD Ryzen 9 7950X 16-Core Processor"
    assert summary["cpufreq"]["scaling_governor"] == {"performance": 2}
    assert summary["thp"] == {"enabled": "always", "defrag": None} and summary["swappiness"] == 10


@pytest.fixture
def gate(monkeypatch):
    spec = spec_from_loader("tunehost_gate_script", SourceFileLoader("tunehost_gate_script", str(GATE)))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_tunehost(doctor_rc, findings=(), calls=None):
    """A `tunehost` runner whose `doctor --json` exits doctor_rc with these (check, severity, summary) findings."""
    def run(*args, capture=True):
        if calls is not None:
            calls.append(args)
        if doctor_rc not in (0, 2):
            return subprocess.CompletedProcess(args, doctor_rc, "", "tunehost: error: boom\n")
        doc = {"tunehost": "0", "snapshot": None, "verdict": "ready" if doctor_rc == 0 else "not-ready",
               "findings": [{"check": c, "severity": sev, "summary": text, "evidence": {}, "fix": None}
                            for c, sev, text in findings]}
        return subprocess.CompletedProcess(args, doctor_rc, json.dumps(doc), "")
    return run


def test_gate_is_executable():
    assert GATE.stat().st_mode & 0o111


def test_not_ready_stops_before_the_command(gate, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gate, "tunehost", fake_tunehost(2, [("ram-speed", "fail", "DDR5 at 4800 of 6000 MT/s")]))
    marker = tmp_path / "ran"
    rc = gate.main(["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    assert rc == 2 and not marker.exists()
    err = capsys.readouterr().err
    assert "FAIL ram-speed: DDR5 at 4800 of 6000 MT/s" in err and "not ready" in err


def test_doctor_that_cannot_run_is_exit_1(gate, monkeypatch):
    monkeypatch.setattr(gate, "tunehost", fake_tunehost(1))
    assert gate.main(["--", "true"]) == 1


def test_ready_runs_the_command_and_records_the_host(gate, monkeypatch, tmp_path):
    monkeypatch.setattr(gate, "tunehost", fake_tunehost(0))
    marker = tmp_path / "ran"
    out = tmp_path / "results"
    rc = gate.main(["--out", str(out), "--", sys.executable, "-c",
                    f"open({str(marker)!r}, 'w'); raise SystemExit(3)"])
    assert rc == 3 and marker.exists()
    assert json.loads((out / "host/doctor.json").read_text())["verdict"] == "ready"
    summary = json.loads((out / "host/summary.json").read_text())
    assert summary["exit_status"] == 3 and summary["command"][0] == sys.executable
    assert "thp" in summary and "kernel" in summary


def test_bad_arguments_are_exit_1(gate):
    assert gate.main(["--wait-quiet", "-5"]) == 1
    assert gate.main(["--full-snapshot"]) == 1


def test_a_clamped_cpu_stops_the_benchmark_and_the_figures_are_printed(gate, monkeypatch, tmp_path, capsys):
    calls = []
    findings = [("memory-bandwidth", "ok", "measured 41.5 GB/s; your DIMMs as configured allow 58"),
                ("cpu-clocks", "fail", "all-core clock 1100 MHz under load, 27 % of the 4000 MHz base")]
    monkeypatch.setattr(gate, "tunehost", fake_tunehost(2, findings, calls))
    marker = tmp_path / "ran"
    rc = gate.main(["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    assert rc == 2 and not marker.exists()
    err = capsys.readouterr().err
    assert "gate: memory-bandwidth: measured 41.5 GB/s" in err
    assert "FAIL cpu-clocks: all-core clock 1100 MHz" in err
    assert calls == [("doctor", "--json")]  # one doctor run: one measurement, judged and recorded


def test_quick_and_skip_reach_doctor(gate, monkeypatch):
    calls = []
    monkeypatch.setattr(gate, "tunehost", fake_tunehost(0, calls=calls))
    assert gate.main(["--quick", "--skip", "cpu-frequency", "--strict"]) == 0
    assert calls == [("doctor", "--json", "--strict", "--quick", "--skip", "cpu-frequency")]


def test_doctor_output_that_is_not_json_is_exit_1(gate, monkeypatch, capsys):
    monkeypatch.setattr(gate, "tunehost", lambda *a, capture=True: subprocess.CompletedProcess(a, 0, "garbage{", ""))
    assert gate.main(["--", "true"]) == 1
    assert "could not run" in capsys.readouterr().err
