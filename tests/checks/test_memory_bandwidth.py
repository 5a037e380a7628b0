"""memory-bandwidth on snapshots: real dmidecode dumps (tests/data/corpus/dmidecode) with a recorded measure.json.

The measured figures are what tunehost's probe reads on such machines; the DIMM side is the real dump, so the
configured and rated peaks come from the real modules (SOURCES.md says what each dump shows).
"""

from __future__ import annotations

import json

import pytest

from tunehost.check import Severity
from tunehost.checks.memory_bandwidth import MemoryBandwidthCheck
from tunehost.doctor import run_check
from tunehost.facts import HostFacts
from tunehost.facts.measure import MeasureFacts
from tunehost.host import open_host

from tests.conftest import corpus
from tests.measure.test_measure_live import measure_calls

DMI = "dmidecode -t memory"
XMP_OFF = "dmidecode/ddr4-3600-kit-ryzen3600-xmp-off-2133.txt"          # 2x F4-3600C18 at 2133: 34.1 / 57.6 GB/s
XMP_ON = "dmidecode/ddr4-3600-kit-ryzen5900x-xmp-on-3600.txt"           # 2x F4-3600C16 at 3600: 57.6 GB/s
LPDDR5X = "dmidecode/lpddr5x-7500-laptop-ryzen-ai9-365.txt"             # soldered 128-bit LPDDR5X-7500: 120 GB/s
EPYC = "dmidecode/ddr5-rdimm-24dimm-2s-epyc9654-4800.txt"                # 24 channels DDR5-4800
CHASSIS = {"/sys/class/dmi/id/chassis_type": "3\n"}


def judge(make_snapshot, dump: str | None, sample, *, fs=None):
    snap = make_snapshot(fs={**CHASSIS, **(fs or {})}, cmd={DMI: corpus(dump)} if dump else {},
                         samples={"measure": sample} if sample is not None else None)
    return run_check(MemoryBandwidthCheck(), HostFacts(open_host(snap)))


def one(findings):
    assert len(findings) == 1, findings
    return findings[0]


def test_healthy_desktop_with_xmp_on_is_ok(make_snapshot):
    f = one(judge(make_snapshot, XMP_ON, {"format": 1, "memory_read_gbps": 41.5, "memory_read_threads": 12}))
    assert f.severity is Severity.OK
    assert f.summary.startswith("measured 41.5 GB/s; your DIMMs as configured allow 58; rated 58 (72 % of")
    assert f.evidence["peak as configured"] == "57.6 GB/s (2 channels x 3600 MT/s x 8 bytes)"


def test_xmp_off_reports_all_three_numbers_and_points_at_ram_speed(make_snapshot):
    f = one(judge(make_snapshot, XMP_OFF, {"format": 1, "memory_read_gbps": 24.3, "memory_read_threads": 6}))
    assert f.severity is Severity.OK  # 71 % of what 2133 MT/s allows: the memory works; ram-speed blames XMP
    assert "measured 24.3 GB/s; your DIMMs as configured allow 34; rated 58 (see ram-speed)" in f.summary


def test_half_the_configured_peak_is_a_warning_with_the_fix(make_snapshot):
    f = one(judge(make_snapshot, XMP_ON, {"format": 1, "memory_read_gbps": 19.0, "memory_read_threads": 12}))
    assert f.severity is Severity.WARN
    assert "33 % of the configured peak" in f.summary and "60-85 %" in f.summary
    assert f.fix is not None and any("dmidecode" in c for c in f.fix.commands)


def test_a_quarter_of_the_peak_fails(make_snapshot):
    f = one(judge(make_snapshot, XMP_ON, {"format": 1, "memory_read_gbps": 9.5, "memory_read_threads": 12}))
    assert f.severity is Severity.FAIL


def test_apu_soldered_memory_has_its_own_normal_range(make_snapshot):
    healthy = one(judge(make_snapshot, LPDDR5X, {"format": 1, "memory_read_gbps": 58.0, "memory_read_threads": 12}))
    assert healthy.severity is Severity.OK  # 48 %: normal for an APU's CPU side
    low = one(judge(make_snapshot, LPDDR5X, {"format": 1, "memory_read_gbps": 21.0, "memory_read_threads": 12}))
    assert low.severity is Severity.WARN and "40-60 %" in low.summary


def test_servers_and_too_few_threads_are_reported_not_judged(make_snapshot):
    server = one(judge(make_snapshot, EPYC, {"format": 1, "memory_read_gbps": 180.0, "memory_read_threads": 96},
                       fs={"/sys/class/dmi/id/chassis_type": "23\n"}))
    assert server.severity is Severity.INFO and "not judged" in server.summary
    few = one(judge(make_snapshot, XMP_ON, {"format": 1, "memory_read_gbps": 19.0, "memory_read_threads": 1}))
    assert few.severity is Severity.INFO and "cannot saturate" in few.summary


def test_no_dimm_data_is_info_with_the_ceiling_never_a_guess(make_snapshot):
    f = one(judge(make_snapshot, None, {"format": 1, "memory_read_gbps": 31.4, "memory_read_threads": 2}))
    assert f.severity is Severity.INFO
    assert "measured 31.4 GB/s" in f.summary and "~6 t/s for an 8B model" in f.summary
    assert "dmidecode" in f.summary  # says why there is nothing to compare with


@pytest.mark.parametrize("sample, reason", [
    (None, "the snapshot has no samples/measure.json"),
    ({"format": 1, "skipped": "not measured: the host is busy (other processes used 180 % of a core)"},
     "the host is busy"),
    ({"format": 1, "memory_skipped": "the bandwidth probe could not run: MemoryError"}, "MemoryError"),
    ({"format": 1, "memory_read_gbps": "fast"}, "not valid"),
    ({"format": 1, "memory_read_gbps": -3.0}, "not valid"),
    ({"format": 1, "memory_read_gbps": True}, "not valid"),
    ({"format": 1, "memory_read_gbps": [31.4]}, "not valid"),
    ({"format": 1, "memory_read_gbps": 1e12}, "not valid"),
    ({"format": 2, "memory_read_gbps": 31.4}, "format 2"),
    ([1, 2, 3], "not a JSON object"),
    ("31.4", "not a JSON object"),
])
def test_missing_or_hostile_measurement_is_skip_with_the_reason(make_snapshot, sample, reason):
    f = one(judge(make_snapshot, XMP_ON, sample))
    assert f.severity is Severity.SKIP and reason in f.summary, f.summary


@pytest.mark.parametrize("text", ['{"format": 1, "memory_read_gbps": NaN}', '{"format": 1, "memory_read_gbps": '
                                  'Infinity}', '{"format": 1, "memory_read_gbps": ', "\x00\xff garbage"])
def test_nan_infinite_and_broken_json_are_skip(make_snapshot, text):
    snap = make_snapshot(fs=CHASSIS, cmd={DMI: corpus(XMP_ON)})
    (snap / "samples").mkdir(exist_ok=True)
    (snap / "samples" / "measure.json").write_text(text, errors="surrogateescape")
    f = one(run_check(MemoryBandwidthCheck(), HostFacts(open_host(snap))))
    assert f.severity is Severity.SKIP


def test_escapes_in_recorded_strings_never_reach_the_terminal():
    m = MeasureFacts.from_sample({"format": 1, "skipped": "busy\x1b[31m\nFAIL everything"})
    assert m.skipped is not None and "\x1b" not in m.skipped and "\n" not in m.skipped


def test_a_sample_link_out_of_the_snapshot_is_not_read(make_snapshot, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"format": 1, "memory_read_gbps": 73.41}))
    snap = make_snapshot(fs=CHASSIS, cmd={DMI: corpus(XMP_ON)})
    (snap / "samples").mkdir(exist_ok=True)
    (snap / "samples" / "measure.json").symlink_to(outside)
    f = one(run_check(MemoryBandwidthCheck(), HostFacts(open_host(snap))))
    # the figure is not read (the summary names the link's target, whose pytest-NNN directory may hold any digits)
    assert f.severity is Severity.SKIP and "73.4" not in f.summary and "links" in f.summary


def test_a_samples_directory_linked_out_of_the_snapshot_is_not_read(make_snapshot, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "measure.json").write_text(json.dumps({"format": 1, "memory_read_gbps": 99.0}))
    snap = make_snapshot(fs=CHASSIS, cmd={DMI: corpus(XMP_ON)})
    (snap / "samples").symlink_to(outside)
    f = one(run_check(MemoryBandwidthCheck(), HostFacts(open_host(snap))))
    assert f.severity is Severity.SKIP and "links out of the snapshot" in f.summary


def test_measured_above_the_theoretical_peak_is_not_judged(make_snapshot):
    f = one(judge(make_snapshot, XMP_OFF, {"format": 1, "memory_read_gbps": 48.0, "memory_read_threads": 6}))
    assert f.severity is Severity.INFO and "above the theoretical peak" in f.summary


def test_ci_vm_real_measurement_is_info_with_the_ceiling():
    """The CI VM's own measure.json (tunehost snapshot on the 2-vCPU CI machine): no DIMMs to compare with."""
    from tests.conftest import SNAPSHOTS

    f = one(run_check(MemoryBandwidthCheck(), HostFacts(open_host(SNAPSHOTS / "ci-vm"))))
    assert f.severity is Severity.INFO
    assert f.summary.startswith("measured 27.4 GB/s read bandwidth: caps CPU token generation at ~6 t/s")
    assert f.evidence["samples/measure.json memory_read_threads"] == "2"


def test_quick_never_measures(cli, measure_calls):
    result = cli("doctor", "--quick", "--json", "--check", "memory-bandwidth")
    doc = json.loads(result.stdout)
    assert measure_calls == []
    assert [(f["severity"], f["summary"]) for f in doc["findings"]] == [("skip", "not measured (--quick)")]


def test_a_snapshot_never_measures(cli, measure_calls, make_snapshot):
    snap = make_snapshot()
    result = cli("doctor", "--json", "--snapshot", str(snap), "--check", "memory-bandwidth")
    assert result.exit_code == 0 and measure_calls == []
    assert "no samples/measure.json" in json.loads(result.stdout)["findings"][0]["summary"]


@pytest.mark.live
def test_snapshot_records_the_measurement_and_replays_its_verdict(cli, tmp_path):
    from tunehost.checks.memory_bandwidth import MemoryBandwidthCheck
    from tunehost.doctor import run_check

    result = cli("snapshot", str(tmp_path / "snap"))
    assert result.exit_code == 0, result.output
    recorded = json.loads((tmp_path / "snap" / "samples" / "measure.json").read_text())
    assert recorded["format"] == 1 and ("memory_read_gbps" in recorded or "busy" in recorded.get("skipped", ""))
    replay = run_check(MemoryBandwidthCheck(), HostFacts(open_host(tmp_path / "snap")))
    if "memory_read_gbps" in recorded:
        assert f"measured {recorded['memory_read_gbps']:.1f} GB/s" in replay[0].summary
