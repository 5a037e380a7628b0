"""gpu-power-cap: enforced GPU power limits against the default, on real nvidia-smi captures (tests' corpus,
SOURCES.md) and amdgpu hwmon values a public V620 write-up read back (tests/data/README.md), plus missing and garbage
values."""

from tunehost.checks.gpu_power_cap import GpuPowerCapCheck
from tunehost.facts.power_cap import tg_share_at_cap

from tests.conftest import corpus
from tests.gpu.test_checks import S, nvsmi, run, sev
from tests.gpu.test_drm import amd_card


def test_rtx3090_capped_at_200_of_350_w_is_a_warning_with_its_cost_and_the_restore_command(make_snapshot):
    found = run(GpuPowerCapCheck(), nvsmi(make_snapshot, "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt"))
    assert sev(found) == [S.WARN]
    f = found[0]
    assert "200 W is 57% of the default 350 W" in f.summary
    share = tg_share_at_cap(200 / 350)
    assert f"{share.low:.0%}-{share.high:.0%}" in f.summary and share.low < 0.9 < share.high
    assert f.fix.commands == ("sudo nvidia-smi -i 0 -pl 350",)
    assert "published power-limit sweeps" in f.fix.text  # where the figure comes from
    assert any("200.00 W" == v for v in f.evidence.values()) and any("350.00 W" == v for v in f.evidence.values())


def test_cards_at_their_default_limit_are_ok_xml_and_text_forms(make_snapshot):
    for name in ("rtx3080-x16-gen4-loaded-p2-q-x.txt", "a10g-x8-of-x16-gen1-idle-p8-q-x.txt",
                 "tesla-t4-x8-of-x16-gen3-p0-q-x.txt", "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt",
                 "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt"):
        found = run(GpuPowerCapCheck(), nvsmi(make_snapshot, name))
        assert sev(found) == [S.OK], name


def test_a_limit_just_below_the_default_is_ok_and_a_moderate_cap_is_information(make_snapshot):
    text = corpus("nvidia-smi/rtx3090-x16-gen1-of-4-idle-p8-q-x.txt")
    near = text.replace("<enforced_power_limit>200.00 W", "<enforced_power_limit>330.00 W")
    assert sev(run(GpuPowerCapCheck(), make_snapshot(cmd={"nvidia-smi -q -x": near}))) == [S.OK]
    moderate = text.replace("<enforced_power_limit>200.00 W", "<enforced_power_limit>280.00 W")
    found = run(GpuPowerCapCheck(), make_snapshot(cmd={"nvidia-smi -q -x": moderate}))
    assert sev(found) == [S.INFO] and "80% of the default" in found[0].summary


def test_garbage_or_missing_limits_are_skipped_with_the_reason(make_snapshot):
    text = corpus("nvidia-smi/rtx3090-x16-gen1-of-4-idle-p8-q-x.txt")
    garbage = text.replace("<default_power_limit>350.00 W", "<default_power_limit>N/A")
    found = run(GpuPowerCapCheck(), make_snapshot(cmd={"nvidia-smi -q -x": garbage}))
    assert sev(found) == [S.SKIP] and "default power limit could not be read" in found[0].summary
    absurd = text.replace("<enforced_power_limit>200.00 W", "<enforced_power_limit>99999.00 W")
    assert sev(run(GpuPowerCapCheck(), make_snapshot(cmd={"nvidia-smi -q -x": absurd}))) == [S.SKIP]


def test_no_gpu_is_a_skip(make_snapshot):
    found = run(GpuPowerCapCheck(), make_snapshot())
    assert sev(found) == [S.SKIP] and "no discrete GPU" in found[0].summary


def _v620(make_snapshot, cap_uw: str, default_uw: str | None):
    dev = "/sys/class/drm/card1/device"
    fs = {**amd_card("card1", "0000:03:00.0", "0x73a1", total=32 * 1024 ** 3, used=0),
          f"{dev}/hwmon/hwmon3/name": "amdgpu\n", f"{dev}/hwmon/hwmon3/power1_cap": cap_uw}
    if default_uw is not None:
        fs[f"{dev}/hwmon/hwmon3/power1_cap_default"] = default_uw
    return make_snapshot(fs=fs)


def test_amd_hwmon_cap_170_of_250_w_read_back_on_a_v620(make_snapshot):
    found = run(GpuPowerCapCheck(), _v620(make_snapshot, "170000000\n", "250000000\n"))
    assert sev(found) == [S.WARN] and "170 W is 68% of the default 250 W" in found[0].summary
    assert "power1_cap_default" in found[0].fix.commands[0] and "hwmon*/power1_cap" in found[0].fix.commands[0]


def test_amd_stock_250_w_is_ok_and_an_absent_default_is_a_skip(make_snapshot):
    assert sev(run(GpuPowerCapCheck(), _v620(make_snapshot, "250000000\n", "250000000\n"))) == [S.OK]
    found = run(GpuPowerCapCheck(), _v620(make_snapshot, "170000000\n", None))
    assert sev(found) == [S.SKIP] and "power1_cap_default" in found[0].summary
    assert sev(run(GpuPowerCapCheck(), _v620(make_snapshot, "garbage\n", "250000000\n"))) == [S.SKIP]


def test_the_share_kept_falls_with_the_cap_and_never_exceeds_one():
    shares = [tg_share_at_cap(r) for r in (1.0, 0.9, 0.7, 0.57, 0.43, 0.29, 0.1)]
    assert [s.low for s in shares] == sorted((s.low for s in shares), reverse=True)
    assert all(0 < s.low <= s.high <= 1 for s in shares) and shares[0].low == 1.0


def test_compute_bound_decode_keeps_less_at_every_cap_and_holds_the_published_hybrid_sweeps():
    ratios = [r / 100 for r in range(10, 101)]
    for r in ratios:
        memory, compute = tg_share_at_cap(r), tg_share_at_cap(r, compute_bound=True)
        assert 0 < compute.low <= memory.low and compute.high <= memory.high + 1e-9, r
    lows = [tg_share_at_cap(r, compute_bound=True).low for r in ratios]
    assert lows == sorted(lows)
    # the sweeps in tunehost/facts/power_cap.py's docstring ([3]-[5]: two RTX 3090s and an RTX 4090 on Qwen3.6-27B)
    for ratio, kept in ((300 / 350, 1.03), (250 / 350, 0.99), (200 / 350, 0.64), (150 / 350, 0.26), (330 / 388, 0.95),
                        (230 / 388, 0.66), (400 / 450, 1.0), (300 / 450, 0.97), (250 / 450, 0.89)):
        share = tg_share_at_cap(ratio, compute_bound=True)
        assert share.low <= kept <= max(share.high, 1.03), (ratio, kept, share)
    assert "hybrid" in tg_share_at_cap(0.5, compute_bound=True).text()


def test_the_nvml_sample_of_a_real_snapshot_at_its_default_and_capped(make_snapshot):
    import json

    from tests.conftest import DATA

    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    found = run(GpuPowerCapCheck(), make_snapshot(samples={"nvml": nvml}))
    assert sev(found) == [S.OK] and "RTX 3060" in found[0].summary
    row = nvml["gpus"][0]
    row.update(power_limit_w=round(row["power_default_limit_w"] * 0.5, 2))  # `nvidia-smi -pl` to half the default
    found = run(GpuPowerCapCheck(), make_snapshot(samples={"nvml": nvml}))
    assert sev(found) == [S.WARN] and "is 50% of the default" in found[0].summary
