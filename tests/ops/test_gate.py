"""The pre-benchmark gate: quiet detection (pure, injected clock), host summary, and `tunehost gate` run as a user
runs it (a subprocess: its stdout, exit statuses and signals are the point)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS
from tunehost.host import open_host
from tunehost.ops.gate import (EXIT_NOT_QUIET, EXIT_NOT_READY, EXIT_NOT_FOUND, EXIT_SOFTWARE, EXIT_USAGE,
                                  GATE_EXIT_STATUSES, SI_KERNEL, QuietReading, host_summary, max_temperature, wait_quiet,
                                  should_forward, why_not_quiet)

ROOT = Path(__file__).resolve().parents[2]
READY = SNAPSHOTS / "ci-vm"  # the real CI machine: ready
NOT_READY = SNAPSHOTS / "desktop-12700f-rtx3060"  # XMP off, EPP split, power-profiles-daemon balanced: not ready


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


def gate(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """`tunehost gate ARGS` as a user runs it (the module: the installed script is tested in tests/install)."""
    return subprocess.run([sys.executable, "-m", "tunehost", "gate", *args], capture_output=True, text=True,
                          timeout=timeout, **kw)


@pytest.mark.parametrize("command, status", [(["true"], 0), (["false"], 1), (["sh", "-c", "exit 7"], 7),
                                             (["sh", "-c", "kill -KILL $$"], 128 + 9)])
def test_the_commands_exit_status_passes_through(command, status):
    result = gate("--snapshot", str(READY), "--", *command)
    assert result.returncode == status, result.stderr
    assert "gate: tunehost doctor: ready" in result.stderr


def test_stdout_is_the_commands_only():
    result = gate("-s", str(READY), "--", "sh", "-c", "echo only-this; echo to-err >&2")
    assert result.returncode == 0
    assert result.stdout == "only-this\n"
    assert "to-err" in result.stderr
    assert "gate: memory-bandwidth: measured 27.4 GB/s" in result.stderr  # the measured figures, on every run


def test_without_dashes_the_commands_options_stay_its_own():
    result = gate("-s", str(READY), "sh", "-c", "echo $0", "--quick")
    assert result.returncode == 0 and result.stdout == "--quick\n"


def test_not_ready_refuses_with_its_own_status_and_does_not_run_the_command(tmp_path):
    marker = tmp_path / "ran"
    result = gate("-s", str(NOT_READY), "--", "touch", str(marker))
    assert result.returncode == EXIT_NOT_READY == 69
    assert not marker.exists() and result.stdout == ""
    assert "FAIL ram-speed: XMP/EXPO is off" in result.stderr and "not ready" in result.stderr


@pytest.mark.parametrize("args", [["--wait-quiet", "-5", "--", "true"], ["--wait-quiet", "nan", "--", "true"],
                                  ["--bogus", "--", "true"], ["--skip", "no-such-check", "--", "true"]])
def test_bad_arguments_are_ex_usage(args, tmp_path):
    result = gate("-s", str(READY), *args)
    assert result.returncode == EXIT_USAGE == 64, result.stderr
    assert result.stderr.startswith("tunehost: error: ") and result.stdout == ""


def test_a_command_that_is_not_there_is_127():
    result = gate("-s", str(READY), "--", "no-such-command-tunehost-test")
    assert result.returncode == EXIT_NOT_FOUND == 127
    assert "cannot run 'no-such-command-tunehost-test'" in result.stderr


def test_an_unreadable_snapshot_is_ex_software(tmp_path):
    result = gate("-s", str(tmp_path / "missing"), "--", "true")
    assert result.returncode == EXIT_SOFTWARE == 70 and "does not exist" in result.stderr


BUSY = {"cpu_percent_total": 99.0,
        "processes": [{"pid": 4242, "name": "make", "cpu_percent": 190.0, "self": False}]}


def test_a_host_that_stays_busy_is_not_judged_and_the_command_does_not_run(tmp_path):
    snap = shutil.copytree(READY, tmp_path / "busy")
    (snap / "samples" / "activity.json").write_text(json.dumps(BUSY))
    marker = tmp_path / "ran"
    result = gate("-s", str(snap), "--wait-quiet", "1", "--", "touch", str(marker))
    assert result.returncode == EXIT_NOT_QUIET == 75
    assert "host did not settle within 1 s: busy: make 190%" in result.stderr
    assert "tunehost doctor" not in result.stderr and not marker.exists()


def test_the_host_is_judged_after_the_wait(monkeypatch):
    """The order that matters: a compile finishing during --wait-quiet must not be judged (and measured)."""
    from tunehost.cli import doctor as doctor_cli
    from tunehost.cli.gate import GateRun, run_gate
    from tunehost.ops import gate as gate_logic

    calls = []
    real_wait, real_judge = gate_logic.wait_quiet, doctor_cli.judge

    def wait(*args, **kw):
        calls.append("wait")
        return real_wait(*args, **kw)

    def judge(*args, **kw):
        calls.append("judge")
        return real_judge(*args, **kw)

    monkeypatch.setattr(gate_logic, "wait_quiet", wait)
    monkeypatch.setattr(doctor_cli, "judge", judge)
    args = GateRun(command=[], wait_quiet=5, out=None, quick=True, strict=False, skip=[], snapshot=READY)
    assert run_gate(args) == 0
    assert calls == ["wait", "judge"]


def test_out_records_the_report_and_the_summary_next_to_the_results(tmp_path):
    out = tmp_path / "results"
    result = gate("-s", str(READY), "--out", str(out), "--", "sh", "-c", "exit 3")
    assert result.returncode == 3
    doc = json.loads((out / "host" / "doctor.json").read_text())
    assert doc["verdict"] == "ready" and doc["snapshot"] == str(READY)
    summary = json.loads((out / "host" / "summary.json").read_text())
    assert summary["exit_status"] == 3 and summary["command"] == ["sh", "-c", "exit 3"]
    assert summary["snapshot"] == str(READY) and summary["online_cpus"] == 2
    assert not (out / "host" / "snapshot").exists()  # judged from a snapshot: nothing live to record


def test_a_refusal_is_recorded_too(tmp_path):
    out = tmp_path / "results"
    assert gate("-s", str(NOT_READY), "--out", str(out), "--", "true").returncode == EXIT_NOT_READY
    assert json.loads((out / "host" / "summary.json").read_text())["verdict"] == "not-ready"
    assert "exit_status" not in json.loads((out / "host" / "summary.json").read_text())


@pytest.mark.live
def test_live_out_records_a_replayable_snapshot_with_the_measurement(tmp_path):
    """On the live host (whatever it is: ready or not), --out keeps the facts doctor judged, measurement included,
    and replaying them gives the verdict the gate acted on."""
    out = tmp_path / "results"
    result = gate("--out", str(out), "--", "true", timeout=300)
    assert result.returncode in (0, EXIT_NOT_READY), result.stderr
    snap = out / "host" / "snapshot"
    assert (snap / "manifest.json").is_file() and (snap / "samples" / "measure.json").is_file()
    recorded = json.loads((out / "host" / "doctor.json").read_text())
    replay = subprocess.run([sys.executable, "-m", "tunehost", "doctor", "--json", "--snapshot", str(snap)],
                            capture_output=True, text=True, timeout=120)
    assert json.loads(replay.stdout)["verdict"] == recorded["verdict"]
    again = gate("--out", str(out), "--", "true")
    assert again.returncode == EXIT_SOFTWARE and "already holds a snapshot" in again.stderr


def test_a_signal_sent_to_the_gate_reaches_the_command():
    script = "trap 'echo got-term; exit 42' TERM; echo started; while :; do sleep 0.05; done"
    proc = subprocess.Popen([sys.executable, "-m", "tunehost", "gate", "-s", str(READY), "--", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "started\n"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 42 and out == "got-term\n"


def _sigint_as_from_a_terminal() -> None:
    """In the child: SIGINT back to its default. A test run started in the background (`pytest &`, nohup) ignores
    SIGINT, and an ignored signal is inherited through exec, so the gate and its command would never see it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_command_killed_by_a_forwarded_signal_is_128_plus_n():
    proc = subprocess.Popen([sys.executable, "-m", "tunehost", "gate", "-s", str(READY), "--",
                             "sh", "-c", "echo started; exec sleep 60"], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL, preexec_fn=_sigint_as_from_a_terminal)
    try:
        assert proc.stdout.readline() == "started\n"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGINT


def test_every_gate_status_is_documented():
    docs = (ROOT / "docs" / "gate.md").read_text()
    help_text = gate("--help").stdout
    for status in GATE_EXIT_STATUSES:
        assert f"| {status} |" in docs, status
        assert f"{status} " in help_text, status


def test_scripts_gate_is_a_thin_wrapper_of_the_installed_command():
    script = ROOT / "scripts" / "gate"
    assert script.stat().st_mode & 0o111
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    result = subprocess.run([str(script), "-s", str(READY), "--", "sh", "-c", "exit 5"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 5, result.stderr


def test_signals_from_the_terminal_are_not_sent_twice():
    """The terminal sends SIGINT to the whole foreground process group, the command included: the gate must not send
    it a second one (llama-server takes a second Ctrl-C as "quit now"); kill(2) from elsewhere is passed on."""
    assert not should_forward(signal.SIGINT, SI_KERNEL) and not should_forward(signal.SIGHUP, SI_KERNEL)
    assert should_forward(signal.SIGINT, 0) and should_forward(signal.SIGTERM, 0)  # SI_USER: kill(2)
    assert not should_forward(signal.SIGCHLD, 0)


def test_ctrl_c_in_the_terminal_reaches_the_command_and_the_gate_waits_for_it():
    """Typed in a real terminal (a pty): the command handles Ctrl-C, and its status, not the gate's, comes back."""
    import pty

    script = ("trap 'n=$((n+1))' INT; echo started; while [ \"${n:-0}\" = 0 ]; do sleep 0.05; done; "
              "echo \"interrupted\"; exit 3")
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        _sigint_as_from_a_terminal()  # else sh could not trap it (one ignored on entry stays ignored): a hang
        os.execv(sys.executable, [sys.executable, "-m", "tunehost", "gate", "-s", str(READY), "--",
                                  "sh", "-c", script])
    output = b""
    try:
        while b"started" not in output:
            output += os.read(fd, 4096)
        os.write(fd, b"\x03")  # Ctrl-C, as typed
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            output += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert b"interrupted" in output, output
    assert os.waitstatus_to_exitcode(status) == 3


def test_a_llama_tool_killed_by_sigill_is_explained(tmp_path):
    fake = tmp_path / "llama-bench"
    fake.write_text("#!/bin/sh\nkill -ILL $$\n")
    fake.chmod(0o755)
    result = gate("--snapshot", str(READY), "--", str(fake))
    assert result.returncode == 128 + 4, result.stderr
    assert "llama-bench was killed by SIGILL" in result.stderr and "built for another CPU" in result.stderr


def test_live_wait_quiet_is_the_judgement_tunes_rounds_use():
    """A build's short-lived compilers: no process over half a CPU in one process list (what read_quiet saw, so
    the gate let the host through), but the machine busy 2 s in every 5: the rounds' judgement refuses it, as
    tune would."""
    from tests.tune.busy import LoadedBench, bursty, quiet
    from tunehost.host import open_host
    from tunehost.ops.gate import read_quiet, wait_quiet_live

    def open_ready():
        return open_host(READY)

    assert not read_quiet(open_ready()).hogs
    busy = LoadedBench(bursty)
    result = wait_quiet_live(open_ready, 30, clock=busy.clock, sleep=busy.advance, watcher=busy.watch().watcher)
    assert not result.quiet and result.reason.startswith("busy: other processes used")
    assert result.waited_s <= 30 + 0.5
    calm = LoadedBench(quiet)
    result = wait_quiet_live(open_ready, 30, clock=calm.clock, sleep=calm.advance, watcher=calm.watch().watcher)
    assert result.quiet and result.waited_s == pytest.approx(4.0)


def test_live_wait_quiet_takes_no_activity_sample_for_the_temperature(make_snapshot):
    """The live wait's CPU judgement is the watch's windows; its temperature readings read the sensor files only,
    never the `activity` sample (a 1.5 s process list on a live host)."""
    from tests.tune.busy import LoadedBench, quiet
    from tunehost.ops.gate import wait_quiet_live

    snap = make_snapshot(fs={"/sys/class/thermal/thermal_zone0/temp": "52500\n"},
                         samples={"activity": {"cpu_percent_total": 7.0, "processes": []}})
    sampled: list[str] = []

    def open_counted():
        host = open_host(snap)
        sample = host.sample
        host.sample = lambda name: sampled.append(name) or sample(name)  # type: ignore[method-assign]
        return host

    calm = LoadedBench(quiet)
    result = wait_quiet_live(open_counted, 30, clock=calm.clock, sleep=calm.advance, watcher=calm.watch().watcher)
    assert result.quiet and [r.max_temp_c for r in result.readings] == [52.5, 52.5]
    assert "activity" not in sampled


def _edge(snapshot, said, opened=None):
    from tunehost.doctor import run_doctor
    from tunehost.doctor.registry import load_checks
    from tunehost.ops.gate import GateEdge

    checks = load_checks().checks

    def fresh(record):
        if opened is not None:
            opened.append(record)
        return open_host(snapshot, record=record)

    return GateEdge(fresh_host=fresh, judge=lambda facts: run_doctor(facts, checks),
                    record_snapshot=lambda facts, directory: None, on_status=said.append)


def test_the_gate_operation_returns_its_result_and_never_prints(capfd, tmp_path):
    """The operation (tunehost.ops.gate.run_gate) says its lines through on_status and returns what happened; the
    command's own output is the only thing written."""
    from tunehost.ops.gate import GateRequest, run_gate

    said: list[str] = []
    result = run_gate(GateRequest(["sh", "-c", "exit 3"], out=tmp_path, snapshot=READY), _edge(READY, said))
    assert result.status == 3 and result.ran and result.error is None and result.cannot_run is None
    assert result.doc is not None and result.doc["verdict"] == "ready"
    assert said[-2:] == [f"doctor report and host facts written to {tmp_path / 'host'}", "tunehost doctor: ready"]
    assert json.loads((tmp_path / "host" / "summary.json").read_text())["exit_status"] == 3
    assert capfd.readouterr() == ("", "")


def test_the_gate_operation_refuses_without_running_the_command(capfd, tmp_path):
    from tunehost.ops.gate import GateRequest, run_gate

    said: list[str] = []
    marker = tmp_path / "ran"
    result = run_gate(GateRequest(["touch", str(marker)], snapshot=NOT_READY), _edge(NOT_READY, said))
    assert result.status == EXIT_NOT_READY and not result.ran and result.doc["verdict"] == "not-ready"
    assert "tunehost doctor: ready" not in said and not marker.exists()
    missing = run_gate(GateRequest(["/nonexistent/tunehost-gate-test"], snapshot=READY), _edge(READY, said))
    assert missing.status == EXIT_NOT_FOUND and not missing.ran
    assert missing.cannot_run.startswith("cannot run '/nonexistent/tunehost-gate-test': ")
    assert capfd.readouterr() == ("", "")


def test_the_gate_operation_judges_a_snapshot_without_a_recording_host(tmp_path):
    from tunehost.ops.gate import GateRequest, run_gate

    opened: list[bool] = []
    run_gate(GateRequest([], out=tmp_path, snapshot=READY), _edge(READY, [], opened))
    assert opened == [False]  # a snapshot is judged as it is: nothing to record
