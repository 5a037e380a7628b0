"""Profiles: the pure merger, include resolution and validation (every bad profile is one clear error)."""

from __future__ import annotations

import pytest

from tunehost.errors import TunehostError
from tunehost.apply.profiles import (
    SETTING_KEYS, available_profiles, builtin_dir, load_all, load_profile, merge, override, validate,
)


def test_merge_later_wins_and_keeps_apply_order():
    merged = merge([{"swappiness": 10, "boost": True, "include": ["x"], "description": "a"},
                    {"boost": False, "governor": "performance"}])
    assert merged == {"governor": "performance", "boost": False, "swappiness": 10}
    assert list(merged) == [k for k in SETTING_KEYS if k in merged]


def test_merge_of_nothing_is_empty():
    assert merge([]) == {}


def test_builtin_profiles_load_and_variants_stay_small():
    names = available_profiles([builtin_dir()])
    assert {"throughput", "throughput-quiet", "benchmark"} <= set(names)
    throughput = load_profile("throughput", [builtin_dir()])
    quiet = load_profile("throughput-quiet", [builtin_dir()])
    assert throughput.settings["governor"] == "performance" and throughput.settings["epp"] == "performance"
    assert throughput.settings["boost"] is True and throughput.settings["thp"] == "always"
    assert throughput.settings["swappiness"] == 10
    assert throughput.settings["tuned_profile"] == "throughput-performance"
    assert "thp_defrag" not in throughput.settings  # left at the kernel default, as TuneD does
    assert quiet.includes == ("throughput",)
    assert dict(quiet.settings) == {**throughput.settings, "boost": False}
    bench = load_profile("benchmark", [builtin_dir()])
    assert bench.settings["boost"] is False and bench.settings["thp_defrag"] == "always"
    assert quiet.targets()["boost"] == "off" and throughput.targets()["swappiness"] == "10"
    assert all(p.description for p in load_all([builtin_dir()]))


def _dir(tmp_path, **files):
    d = tmp_path / "profiles"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        (d / f"{name}.toml").write_text(text)
    return [d]


def test_include_is_depth_first_and_each_once(tmp_path):
    dirs = _dir(tmp_path, base='swappiness = 1\nboost = true\n', a='include = ["base"]\nswappiness = 2\n',
                b='include = ["base"]\nboost = false\n', top='include = ["a", "b"]\nthp = "never"\n')
    p = load_profile("top", dirs)
    assert p.includes == ("base", "a", "b")
    assert dict(p.settings) == {"boost": False, "thp": "never", "swappiness": 2}


@pytest.mark.parametrize("text, message", [
    ('governor = "performance"\nturbo = true\n', "unknown key 'turbo'"),
    ('swappiness = "10"\n', "swappiness must be an integer, not a string"),
    ('swappiness = true\n', "swappiness must be an integer, not true or false"),
    ('boost = "yes"\n', "boost must be true or false"),
    ('thp = "sometimes"\n', "thp = 'sometimes' is not one of always, madvise, never"),
    ('swappiness = 500\n', "must be between 0 and 200"),
    ('include = "throughput"\n', "include must be a list"),
    ('include = [1]\n', "include must be a list of profile names"),
    ('governor = "perf ormance"\n', "must be one word"),
    ('[cpu]\ngovernor = "performance"\n', "unknown key 'cpu'"),
    ('governor = performance\n', "is not valid TOML"),
    ('this is not toml at all ][\n', "is not valid TOML"),
])
def test_bad_profiles_are_one_clear_error(tmp_path, text, message):
    dirs = _dir(tmp_path, bad=text)
    with pytest.raises(TunehostError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_profile("bad", dirs)


def test_include_cycle(tmp_path):
    dirs = _dir(tmp_path, a='include = ["b"]\n', b='include = ["c"]\n', c='include = ["a"]\n')
    with pytest.raises(TunehostError, match="include cycle: a -> b -> c -> a"):
        load_profile("a", dirs)


def test_self_include_is_a_cycle(tmp_path):
    with pytest.raises(TunehostError, match="include cycle: me -> me"):
        load_profile("me", _dir(tmp_path, me='include = ["me"]\n'))


def test_missing_include(tmp_path):
    with pytest.raises(TunehostError, match="profile 'a' includes 'nope', which does not exist"):
        load_profile("a", _dir(tmp_path, a='include = ["nope"]\n'))


def test_missing_profile_names_the_available_ones(tmp_path):
    with pytest.raises(TunehostError, match=r"no profile named 'zzz' \(available: a\)"):
        load_profile("zzz", _dir(tmp_path, a=""))


def test_profile_name_cannot_escape_the_directory(tmp_path):
    with pytest.raises(TunehostError, match="invalid profile name"):
        load_profile("../etc/passwd", _dir(tmp_path, a=""))


def test_override_is_validated():
    p = load_profile("throughput", [builtin_dir()])
    assert override(p, power_daemon="tuned-ppd").settings["power_daemon"] == "tuned-ppd"
    assert list(override(p, power_daemon="ppd").settings)[0] == "power_daemon"  # apply order, not insertion order
    with pytest.raises(TunehostError, match="power_daemon = 'systemd' is not one of ppd, tuned-ppd"):
        override(p, power_daemon="systemd")


def test_validate_accepts_every_documented_key():
    validate("all", {"description": "x", "include": [], "power_daemon": "ppd", "tuned_profile": "latency-performance",
                     "power_profile": "balanced", "governor": "schedutil", "epp": "balance_power", "boost": False,
                     "thp": "madvise", "thp_defrag": "defer+madvise", "swappiness": 0})
