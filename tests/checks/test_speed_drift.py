"""speed-drift: the results store's raw sample (tunehost.store.doctor_sample), its facts and the check's judgement."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS
from checks.speed_drift import NO_RUNS, SpeedDriftCheck, drift_command
from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.identity import HostIdentity
from tunehost.facts.results import NO_SAMPLE, NOT_READ, ResultsFacts, histories
from tunehost.host import open_host
from tunehost.store import NewRun, StoredResult, doctor_sample, open_store, store_path

KERNEL = "/proc/sys/kernel/osrelease"
BIOS_DATE = "/sys/class/dmi/id/bios_date"
ROUNDS = {"baseline": {"tg128": [20.1, 20.0, 19.9, 20.2, 20.0]}}
SLOWER_ROWS = [{"test": "tg128", "then": 20.0, "now": 14.0, "change_percent": -30.0, "low": 0.66, "high": 0.74,
                "verdict": "slower", "rounds_then": 5, "rounds_now": 5}]


def stored_run(command: str, host: dict, *, model_path: str = "/home/sam/models/Qwen3-8B-Q4_K_M.gguf",
               digest: str = "0123456789abcdef01234567", tg: float = 20.0, build: str = "b6000 (abc1234)",
               summary: dict | None = None) -> NewRun:
    return NewRun(command=command, host=host, host_fp=HostIdentity.from_json(host).fingerprint(), build=build,
                  model_path=model_path, model_hash=digest, model_name=None,
                  results=(StoredResult("baseline", "k1", ("-t", "4"), "tg128", "tg", tg, 5),),
                  summary=summary if summary is not None else {"rounds_ts": ROUNDS})


def drift_summary(verdict: str, since: int, changed: list[str], rows: list[dict] | None = None) -> dict:
    return {"rounds_ts": ROUNDS, "verdict": verdict, "since_run": since, "changed": changed,
            "rows": SLOWER_ROWS if rows is None else rows}


def record(*runs: NewRun) -> list[int]:
    with open_store() as store:
        return [store.record(run) for run in runs]


def identity_of(snapshot: Path) -> dict:
    return HostIdentity.gather(HostFacts(open_host(snapshot))).to_json()


def with_results(snapshot: Path, sample: object) -> Path:
    (snapshot / "samples").mkdir(exist_ok=True)
    (snapshot / "samples" / "results.json").write_text(json.dumps(sample))
    return snapshot


def judge(snapshot: Path) -> list:
    return list(SpeedDriftCheck().run(HostFacts(open_host(snapshot))))


# ---------------------------------------------------------------- the sampler against a real store


def test_sample_of_a_real_store_is_raw_bounded_and_names_no_path(tmp_path):
    host = {"cpu": "Test CPU", "kernel": "6.8.0", "memory": [], "gpus": []}
    ref, drift = record(stored_run("bench", {**host, "not_an_identity_field": "kept out"}),
                        stored_run("drift", host, tg=14.0, summary=drift_summary("slower beyond the noise", 1, [])))
    server = NewRun(command="server-bench", host=host, host_fp="fp", build=None, model_path="", model_hash="server:x",
                    model_name="alias", results=(), summary={"servers": []})
    record(server)
    sample = doctor_sample(limit=2)
    assert sample["format"] == 1 and sample["limit"] == 2 and len(sample["runs"]) == 2  # bounded: the newest two
    sample = doctor_sample()
    assert [r["command"] for r in sample["runs"]] == ["server-bench", "drift", "bench"]
    bench = sample["runs"][2]
    assert bench["id"] == ref and bench["model"] == {"name": "Qwen3-8B-Q4_K_M.gguf",
                                                     "hash": "0123456789abcdef01234567"}
    assert bench["tg"] == {"baseline": 20.0} and bench["rounds_recorded"] is True and bench["host"]["kernel"] == "6.8.0"
    assert sample["runs"][1]["drift"] == {"verdict": "slower beyond the noise", "since_run": 1, "changed": [],
                                          "rows": [{k: SLOWER_ROWS[0][k] for k in ("test", "then", "now",
                                                    "change_percent", "low", "high", "verdict")}]}
    assert sample["runs"][1]["id"] == drift
    assert "/home/sam" not in json.dumps(sample)  # the model's file name only
    assert "not_an_identity_field" not in bench["host"] and bench["host"]["bios_date"] is None


def test_no_store_is_no_runs_and_creates_nothing():
    assert doctor_sample()["runs"] == [] and not store_path().exists()
    assert not store_path().parent.exists()


def test_a_damaged_store_is_an_error_line_without_the_state_dir(tmp_path):
    store_path().parent.mkdir(parents=True)
    store_path().write_bytes(b"garbage" * 1000)
    sample = doctor_sample()
    assert "runs" not in sample and "damaged or not a tunehost store" in sample["error"]
    assert str(store_path().parent) not in sample["error"] and "\n" not in sample["error"]
    facts = ResultsFacts.from_sample(sample)
    assert facts.unavailable and facts.unavailable.startswith("the results store could not be read: ")


# ---------------------------------------------------------------- the check, each severity (made-up snapshots)


@pytest.fixture
def snap(make_snapshot):
    return make_snapshot(fs={KERNEL: "6.11.0-19-generic\n", BIOS_DATE: "03/02/2026\n"})


def test_slower_drift_warns_with_then_now_and_what_changed(snap):
    here = identity_of(snap)
    old = {**here, "kernel": "6.8.0-45-generic"}
    record(stored_run("bench", old),
           stored_run("drift", here, tg=14.0, summary=drift_summary("slower beyond the noise", 1,
                                                                    ["kernel 6.8.0-45-generic -> 6.11.0-19-generic"])))
    [finding] = judge(with_results(snap, doctor_sample()))
    assert finding.severity is Severity.WARN
    assert finding.summary.startswith("Qwen3-8B-Q4_K_M.gguf got slower beyond the noise since its best run: "
                                      "tg128 20.00 -> 14.00 t/s (-30.0 %, 95 % interval -34.0..-26.0 %), "
                                      "re-measured 20")
    assert "kernel 6.8.0-45-generic -> 6.11.0-19-generic" in finding.summary
    assert finding.evidence["tg128"] == "20.00 -> 14.00 t/s (-30.0 %, 95 % interval -34.0..-26.0 %): slower"
    assert finding.fix is not None and finding.fix.commands == ("tunehost doctor",
                                                                drift_command("Qwen3-8B-Q4_K_M.gguf"))


def test_a_host_fact_changed_since_the_best_run_is_info(snap):
    here = identity_of(snap)
    record(stored_run("tune", {**here, "kernel": "6.8.0-45-generic"},
                      summary={"winner_rounds": [20.0, 20.1], "settings": {"objective": "tg"}}))
    [finding] = judge(with_results(snap, doctor_sample()))
    assert finding.severity is Severity.INFO
    assert finding.summary.startswith("kernel 6.8.0-45-generic -> 6.11.0-19-generic since the best run of "
                                      "Qwen3-8B-Q4_K_M.gguf (")
    assert finding.summary.endswith("re-measure with `tunehost history --drift --model Qwen3-8B-Q4_K_M.gguf`")


def test_a_change_after_the_last_re_measure_is_info(snap):
    here = identity_of(snap)
    before = {**here, "bios_date": "01/10/2026"}
    record(stored_run("bench", before), stored_run("drift", before, summary=drift_summary("no clear change", 1, [])))
    [finding] = judge(with_results(snap, doctor_sample()))
    assert finding.severity is Severity.INFO and "since the last re-measure of Qwen3-8B-Q4_K_M.gguf" in finding.summary
    assert "bios date 01/10/2026 -> 03/02/2026" in finding.summary


def test_a_fact_unknown_then_or_now_is_no_change(snap):
    here = identity_of(snap)
    record(stored_run("bench", {**here, "kernel": None, "cpu": "AMD EPYC", "memory": ["DIMM 0: X @ 3200 MT/s"]}))
    [finding] = judge(with_results(snap, doctor_sample()))
    # the kernel was not known then, the CPU and memory modules are not known now (no cpuinfo, no dmidecode here)
    assert here["cpu"] is None and here["memory"] == []
    assert finding.severity is Severity.OK


@pytest.mark.parametrize("verdict", ["no clear change", "faster beyond the noise"])
def test_a_re_measure_without_slowdown_and_nothing_changed_is_ok(snap, verdict):
    here = identity_of(snap)
    record(stored_run("bench", here), stored_run("drift", here, summary=drift_summary(verdict, 1, [])))
    [finding] = judge(with_results(snap, doctor_sample()))
    assert finding.severity is Severity.OK and f"found {verdict} and no host fact changed since" in finding.summary


def test_nothing_changed_since_the_best_run_is_ok(snap):
    record(stored_run("bench", identity_of(snap)))
    [finding] = judge(with_results(snap, doctor_sample()))
    assert finding.severity is Severity.OK
    assert finding.summary == "no host fact tunehost records changed since the best run of 1 model"


def test_slower_and_changed_models_each_get_their_finding(snap):
    here = identity_of(snap)
    record(stored_run("bench", here, digest="a" * 24, model_path="/m/a.gguf"),
           stored_run("drift", here, digest="a" * 24, model_path="/m/a.gguf",
                      summary=drift_summary("slower beyond the noise", 1, [])),
           stored_run("bench", {**here, "gpus": ["NVIDIA GeForce RTX 3060"]}, digest="b" * 24, model_path="/m/b.gguf"))
    findings = judge(with_results(snap, doctor_sample()))
    assert [(f.severity, f.evidence["model"]) for f in findings] == [(Severity.WARN, "a.gguf"),
                                                                      (Severity.INFO, "b.gguf")]
    assert "gpus: was NVIDIA GeForce RTX 3060" in findings[1].summary


def test_skips(snap, make_snapshot):
    [old] = judge(snap)  # a snapshot written before doctor read the store
    assert old.severity is Severity.SKIP and old.summary == NO_SAMPLE
    [empty] = judge(with_results(make_snapshot(), doctor_sample()))
    assert empty.severity is Severity.SKIP and empty.summary == NO_RUNS
    server_only = {"format": 1, "runs": [{"id": 1, "created": "2026-11-01T10:00:00Z", "command": "server-bench",
                                          "model": {"hash": "server:abc", "name": "alias"}, "tg": {"s": 20.0}}]}
    [server] = judge(with_results(make_snapshot(), server_only))
    assert server.severity is Severity.SKIP and server.summary == NO_RUNS
    [other] = judge(with_results(make_snapshot(), {"format": 2, "runs": []}))
    assert other.severity is Severity.SKIP and "has format 2" in other.summary


def test_a_live_host_without_the_sample_records_why(tmp_path):
    host = open_host()
    assert ResultsFacts.gather(host).unavailable == NOT_READ
    assert host.recorded_samples["results"] == {"format": 1, "skipped": NOT_READ}  # a snapshot replays the reason


def test_a_llama_cpp_build_change_is_named():
    run = ResultsFacts.from_sample({"runs": [{"id": 3, "created": "2026-11-01T10:00:00Z", "command": "bench",
                                              "host": {"kernel": "6.8"}, "build": "b6000 (abc1234)",
                                              "model": {"hash": "h1", "name": "m.gguf"}, "tg": {"baseline": 9.5},
                                              "rounds_recorded": True}]}).runs
    [model] = histories(run, HostIdentity(kernel="6.8"), 6500)
    assert model.changed_since_reference == ("llama.cpp build b6000 -> b6500",)
    [same] = histories(run, HostIdentity(kernel="6.8"), None)  # no llama-bench found: the build is unknown
    assert same.changed_since_reference == ()


# ---------------------------------------------------------------- hostile samples


BIG = "x" * (10 * 1024 * 1024)
EVIL = "\x1b[31mevil\nname'; rm -rf ~ #.gguf"


def hostile_run(**override) -> dict:
    run = {"id": 7, "created": "2026-11-01T10:00:00Z", "command": "drift",
           "host": {"kernel": ["not", "text"], "memory": "not a list", "cpu": 5},
           "model": {"hash": "h1", "name": EVIL}, "tg": {"a": "NaN", "b": float("inf"), "c": -3, "d": 12.5},
           "drift": {"verdict": "slower beyond the noise", "since_run": "3", "changed": [1, None, "kernel a -> b"],
                     "rows": [{"test": "tg128", "then": "x", "now": 1e300, "change_percent": float("nan"),
                               "low": -1, "high": None, "verdict": "catastrophic"}, "row", None]}}
    run.update(override)
    return run


@pytest.mark.parametrize("sample", [
    [1, 2, 3], "text", 7, {"format": True}, {"runs": "all"}, {"runs": None}, {"error": ["x"]}, {"error": BIG},
    {"runs": [1, "x", None, [], {"id": True}, {"id": 1, "created": BIG}, {"id": 2, "created": "yesterday"}]},
    {"runs": [hostile_run()]},
    {"runs": [hostile_run(model={"hash": "h1", "name": BIG}), hostile_run(id=8, command=BIG)]},
    {"runs": [hostile_run(model={"hash": BIG, "name": "m"}), hostile_run(id=9, drift=BIG)]},
    {"runs": [hostile_run(command="bench", rounds_recorded=True, tg={str(i): 1.0 for i in range(10_000)})]},
])
def test_hostile_samples_never_break_the_check_or_the_terminal(sample):
    findings = list(SpeedDriftCheck().run(HostFacts.of(ResultsFacts.from_sample(sample), HostIdentity())))
    assert findings and all(f.severity in (Severity.SKIP, Severity.WARN, Severity.INFO, Severity.OK) for f in findings)
    for f in findings:
        text = json.dumps(f.to_json())
        assert len(text) < 20_000 and "\x1b" not in f.summary and "\n" not in f.summary
        assert all("\x1b" not in v and "\n" not in v for v in f.evidence.values())


def test_a_hostile_model_name_is_one_quoted_printable_word(make_snapshot):
    snap = with_results(make_snapshot(), {"runs": [hostile_run()]})
    [finding] = judge(snap)
    assert finding.severity is Severity.WARN and "\x1b" not in finding.summary
    command = finding.fix.commands[1]
    assert shlex.split(command) == ["tunehost", "history", "--drift", "--model", "?[31mevil?name'; rm -rf ~ #.gguf"]
    assert finding.evidence["tg128"] == "? -> ? t/s"  # no figure that is not a finite positive number


def test_a_10_mb_sample_file_in_a_snapshot_is_a_skip(make_snapshot):
    snap = with_results(make_snapshot(), {"runs": [hostile_run(model={"hash": "h1", "name": BIG})]})
    [finding] = judge(snap)
    assert finding.severity is Severity.SKIP  # beyond the reader's bound: not read, said so


# ---------------------------------------------------------------- a real captured machine, and the CLI


def test_replay_of_a_real_snapshot_with_a_results_sample(tmp_path):
    # desktop-12700f-rtx3060: a real i7-12700F whose DDR4-3600 kit runs at 2133 MT/s (XMP off). Its best run was
    # recorded with XMP on: the firmware reset is what changed since.
    snap = tmp_path / "desktop"
    shutil.copytree(SNAPSHOTS / "desktop-12700f-rtx3060", snap, symlinks=True)
    here = identity_of(snap)
    assert here["cpu"] == "12th Gen Intel(R) Core(TM) i7-12700F"  # read from the captured files
    assert here["memory"] == ["DIMM 1: F4-3600C18-8GVK @ 2133 MT/s"] * 2
    record(stored_run("bench", {**here, "memory": ["DIMM 1: F4-3600C18-8GVK @ 3600 MT/s"] * 2}))
    [finding] = judge(with_results(snap, doctor_sample()))
    assert finding.severity is Severity.INFO
    assert finding.summary.startswith("memory: was DIMM 1: F4-3600C18-8GVK @ 3600 MT/s; ")
    assert "now DIMM 1: F4-3600C18-8GVK @ 2133 MT/s since the best run of Qwen3-8B-Q4_K_M.gguf" in finding.summary


def test_doctor_json_on_the_live_host_shows_the_finding(cli):
    from tunehost.store.records import host_identity

    here, _ = host_identity(HostFacts(open_host()))
    record(stored_run("bench", here), stored_run("drift", here, tg=14.0,
                                                 summary=drift_summary("slower beyond the noise", 1, [])))
    result = cli("doctor", "--json", "--quick", "--check", "speed-drift")
    assert result.exit_code == 0, result.output
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["check"] == "speed-drift" and finding["severity"] == "warn"
    assert finding["evidence"]["model"] == "Qwen3-8B-Q4_K_M.gguf"


def test_snapshot_records_the_results_sample_and_replays_it(cli, tmp_path):
    from tunehost.ops.doctor import record_results
    from tunehost.host.snapshot import write_snapshot

    here = HostIdentity.gather(HostFacts(open_host())).to_json()
    record(stored_run("bench", here))
    host = open_host(record=True)
    record_results(host)  # what `tunehost doctor` and `tunehost snapshot` do before the checks run
    live = list(SpeedDriftCheck().run(HostFacts(host)))
    write_snapshot(host, tmp_path / "snap")
    assert json.loads((tmp_path / "snap" / "samples" / "results.json").read_text())["runs"][0]["command"] == "bench"
    replayed = judge(tmp_path / "snap")
    assert [f.to_json() for f in replayed] == [f.to_json() for f in live]
    assert live[0].severity in (Severity.OK, Severity.INFO)  # INFO only when llama-bench's build is not b6000
