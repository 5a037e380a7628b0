"""swap: swap use, swap activity, swappiness, zram and memory headroom.

Where the data comes from:
- thp_swap/proc-meminfo-nvidia-dgx-spark-gb10-128gb-unified-swap16g.txt and ...-hp-elitebook-i7-1370p.txt: real
  /proc/meminfo files, used as they are.
- thp_swap/top-header-16gb-laptop-swap-3.2gb-used-iowait-40pct-unresolved-repo.txt: `top`'s "MiB Mem"/"MiB Swap"
  lines turned into the /proc/meminfo fields they carry (tests/cpu/fixtures.top_header_meminfo).
- thp_swap/proc-swaps-thp-never-arm64-host-111gb-swap-used-mglru-unresolved-repo.txt: the `cat /proc/swaps` block of
  a pasted terminal session.
- The activity samples (vmstat_delta over the window) are hand-written in the samples/activity.json format.
"""

from __future__ import annotations

import pytest

from tunehost.check import Severity
from tunehost.checks.swap import SwapCheck
from tunehost.facts import HostFacts
from tunehost.facts.memory import MEMINFO, SWAPPINESS, SWAPS, MemInfo, SwapFacts, parse_meminfo, parse_mm_stat, parse_swaps
from tunehost.host import open_host

from tests.conftest import SNAPSHOTS, corpus
from tests.cpu.fixtures import swaps_block, top_header_meminfo

DGX = "thp_swap/proc-meminfo-nvidia-dgx-spark-gb10-128gb-unified-swap16g.txt"
ELITEBOOK = "thp_swap/proc-meminfo-hp-elitebook-i7-1370p.txt"
TOP = "thp_swap/top-header-16gb-laptop-swap-3.2gb-used-iowait-40pct-unresolved-repo.txt"
ARM64_SWAPS = "thp_swap/proc-swaps-thp-never-arm64-host-111gb-swap-used-mglru-unresolved-repo.txt"
QUIET = {"activity": {"interval_s": 0.5, "vmstat_delta": {"pswpin": 0, "pswpout": 0, "pgmajfault": 3}}}


def run(snap):
    return list(SwapCheck().run(HostFacts(open_host(snap))))


def by_topic(findings):
    """usage, activity, swappiness, headroom (the last three only when they apply)."""
    return {f.summary.split(":")[0]: f for f in findings}


def test_dgx_spark_healthy_idle_with_230mb_swapped_once(make_snapshot):
    # SOURCES: "Healthy idle snapshot: MemAvailable ~116 GiB, swap 16 GiB with ~230 MB used (SwapFree < SwapTotal:
    # some pages were swapped at some point)"
    snap = make_snapshot(fs={MEMINFO: corpus(DGX), SWAPPINESS: "10\n"}, samples=QUIET)
    usage, activity, swappiness, headroom = run(snap)
    assert usage.severity is Severity.OK and "0.2 GiB of 16.0 GiB swap in use" in usage.summary
    assert "at some point" in usage.summary
    assert activity.severity is Severity.OK and swappiness.severity is Severity.OK
    assert headroom.severity is Severity.OK and "116.1 GiB of 119.7 GiB RAM available" in headroom.summary
    assert headroom.evidence[f"{MEMINFO} MemAvailable"] == "121737812 kB"


def test_elitebook_small_swap_entirely_free(make_snapshot):
    # SOURCES: "Healthy: MemTotal 31 GiB, MemAvailable 27.6 GiB, small 976 MiB swap entirely free"
    findings = run(make_snapshot(fs={MEMINFO: corpus(ELITEBOOK), SWAPPINESS: "60\n"}, samples=QUIET))
    usage, activity, swappiness, headroom = findings
    assert usage.severity is Severity.OK and "none in use" in usage.summary
    assert swappiness.severity is Severity.INFO and swappiness.fix.commands[0] == "sudo sysctl -w vm.swappiness=10"
    assert headroom.severity is Severity.OK and "27.6 GiB" in headroom.summary


def test_top_header_16gb_laptop_3_2gb_swap_used_memory_pressure(make_snapshot):
    # SOURCES: "Memory pressure: only 4.2 GiB available, 3.25 GiB swap in use, 40.6% iowait -> swapping/thrashing"
    snap = make_snapshot(fs={MEMINFO: top_header_meminfo(corpus(TOP)), SWAPPINESS: "60\n"})
    usage, activity, swappiness, headroom = run(snap)
    assert usage.severity is Severity.WARN and "3.2 GiB of 8.2 GiB swap in use: memory pressure" in usage.summary
    assert "--mlock" in usage.fix.text and "memlock" in usage.fix.text
    assert usage.fix.commands == ("sudo swapoff -a && sudo swapon -a",)  # 4.2 GiB available > 3.2 GiB swapped
    assert activity.severity is Severity.SKIP  # top carries no swap-in counter: not guessed
    assert swappiness.severity is Severity.WARN  # swappiness 60 while RAM is tight
    assert headroom.severity is Severity.WARN and "4.2 GiB of 15.0 GiB" in headroom.summary


def test_arm64_proc_swaps_111gb_in_use(make_snapshot):
    # SOURCES: "/proc/swaps shows 116922112 kB (~111 GiB) swap in use ... heavy swap use"
    text = swaps_block(corpus(ARM64_SWAPS))
    [area] = parse_swaps(text)
    assert (area.name, area.kind, area.size_kb, area.used_kb, area.priority) == (
        "/dev/nvme0n1p2", "partition", 466838356, 116922112, -2)
    findings = run(make_snapshot(fs={SWAPS: text}))
    usage = findings[0]
    assert usage.severity is Severity.WARN and "111.5 GiB of 445.2 GiB swap in use" in usage.summary
    assert usage.fix.commands == ()  # RAM size unknown: no swapoff advice
    assert findings[-1].severity is Severity.SKIP  # no meminfo: headroom unknown


def test_growing_pswpin_is_fail(make_snapshot):
    samples = {"activity": {"interval_s": 0.5, "vmstat_delta": {"pswpin": 812, "pswpout": 40, "pgmajfault": 900}}}
    findings = run(make_snapshot(fs={MEMINFO: top_header_meminfo(corpus(TOP)), SWAPPINESS: "60\n"}, samples=samples))
    activity = findings[1]
    assert activity.severity is Severity.FAIL and "812 pages swapped in during 0.5 s" in activity.summary
    assert activity.evidence["/proc/vmstat pswpin (delta over 0.5 s)"] == "812"


def test_pswpout_only_is_warn(make_snapshot):
    samples = {"activity": {"interval_s": 0.5, "vmstat_delta": {"pswpin": 0, "pswpout": 77}}}
    activity = run(make_snapshot(fs={MEMINFO: corpus(ELITEBOOK)}, samples=samples))[1]
    assert activity.severity is Severity.WARN and "swapped out" in activity.summary


def test_zram_swap_in_is_only_a_warning_and_compressed_ram_is_named(make_snapshot):
    fs = {MEMINFO: corpus(ELITEBOOK), SWAPPINESS: "180\n",
          SWAPS: "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 8388604 1048576 100\n",
          "/sys/block/zram0/disksize": "8589934592\n", "/sys/block/zram0/comp_algorithm": "lzo lz4 [zstd]\n",
          "/sys/block/zram0/mm_stat": "1073741824 268435456 285212672 0 300000000 1000 10 0 0\n"}
    samples = {"activity": {"interval_s": 0.5, "vmstat_delta": {"pswpin": 5, "pswpout": 9}}}
    usage, activity, swappiness, headroom = run(make_snapshot(fs=fs, samples=samples))
    assert usage.severity is Severity.INFO and "zram0 is zram (zstd, 3.8x compressed)" in usage.summary
    assert activity.severity is Severity.WARN and "zram" in activity.summary
    assert swappiness.severity is Severity.INFO and "zram" in swappiness.summary


def test_no_swap_configured(make_snapshot):
    meminfo = corpus(ELITEBOOK).replace("SwapTotal:        999420", "SwapTotal:             0").replace(
        "SwapFree:         999420", "SwapFree:              0")
    findings = run(make_snapshot(fs={MEMINFO: meminfo, SWAPS: "Filename\tType\tSize\tUsed\tPriority\n"}))
    assert [f.severity for f in findings] == [Severity.OK, Severity.OK]
    assert "no swap configured" in findings[0].summary


def test_snapshot_5800u_zram_laptop():
    findings = list(SwapCheck().run(HostFacts(open_host(SNAPSHOTS / "laptop-5800u-apu"))))
    assert [f.severity for f in findings] == [Severity.INFO, Severity.WARN, Severity.INFO, Severity.OK]


# ---- missing and garbage data ----

def test_nothing_readable_is_skip(make_snapshot):
    [finding] = run(make_snapshot())
    assert finding.severity is Severity.SKIP and MEMINFO in finding.summary


def test_garbage_everywhere_never_crashes(make_snapshot):
    fs = {MEMINFO: "MemTotal: lots\n\x00\xff\nSwapTotal: -4 kB\nMemAvailable kB\n", SWAPS: "\x00garbage\n/dev/x y z\n",
          SWAPPINESS: "sixty\n", "/sys/block/zram0/mm_stat": "nope\n", "/sys/block/zram0/disksize": "big\n"}
    findings = run(make_snapshot(fs=fs, samples={"activity": {"interval_s": "soon", "vmstat_delta": [1, 2]}}))
    assert findings and all(f.severity is not Severity.ERROR for f in findings)


def test_activity_sample_that_is_not_json_is_skip(make_snapshot, tmp_path):
    snap = make_snapshot(fs={MEMINFO: corpus(DGX)})
    (snap / "samples").mkdir()
    (snap / "samples" / "activity.json").write_text("{not json")
    swap = SwapFacts.gather(open_host(snap))
    assert swap.vmstat_delta is None and "not valid JSON" in swap.sample_reason
    assert run(snap)[1].severity is Severity.SKIP


@pytest.mark.parametrize("text, expected", [("", {}), ("MemTotal: 12 kB\nbad line\nHugePages_Total: 0\n",
                                                      {"MemTotal": 12, "HugePages_Total": 0}),
                                            ("Mem Total: 5 kB\nX: -1 kB\n", {})])
def test_parse_meminfo(text, expected):
    assert parse_meminfo(text) == expected


def test_parse_mm_stat_garbage():
    assert parse_mm_stat("garbage") == (None, None) and parse_mm_stat(None) == (None, None)


def test_meminfo_facts_from_hand():
    mem = MemInfo({"MemTotal": 100, "SwapTotal": 50, "SwapFree": 20})
    assert mem.swap_used_kb == 30 and mem.available_kb is None
