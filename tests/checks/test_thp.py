import pytest

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.memory import THP_ENABLED, ThpFacts, selected_mode, selector_options
from tunehost.host import open_host
from tunehost.checks.thp import ThpCheck

from tests.conftest import corpus


@pytest.mark.parametrize("text, mode", [
    ("always [madvise] never", "madvise"),
    ("[always] madvise never\n", "always"),
    ("always madvise [never]", "never"),
    ("garbage", None),
    ("", None),
])
def test_selected_mode(text, mode):
    assert selected_mode(text) == mode


def test_thp_always_on_real_xeon6980p_sample(make_snapshot):
    # corpus/thp_swap/thp-enabled-always-xeon6980p.txt: a real `cat .../enabled` from a Xeon 6980P host
    text = corpus("thp_swap/thp-enabled-always-xeon6980p.txt")
    line = next(l for l in text.splitlines() if "[" in l)
    snap = make_snapshot(fs={THP_ENABLED: line + "\n"})
    [finding] = ThpCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.OK


@pytest.mark.parametrize("enabled, severity", [("always madvise [never]", Severity.WARN),
                                               ("always [madvise] never", Severity.INFO)])
def test_thp_modes(make_snapshot, enabled, severity):
    snap = make_snapshot(fs={THP_ENABLED: enabled})
    [finding] = ThpCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is severity
    assert finding.fix and "tee " + THP_ENABLED in finding.fix.commands[0]
    assert finding.evidence[THP_ENABLED] == enabled


def test_thp_missing_is_skip(make_snapshot):
    [finding] = ThpCheck().run(HostFacts(open_host(make_snapshot())))
    assert finding.severity is Severity.SKIP and THP_ENABLED in finding.summary


def test_thp_from_hand_built_facts():
    [finding] = ThpCheck().run(HostFacts.of(ThpFacts("never", None)))
    assert finding.severity is Severity.WARN


@pytest.mark.parametrize("text, options", [("always [madvise] never\n", ["always", "madvise", "never"]),
                                           ("[always] defer defer+madvise madvise never", ["always", "defer", "defer+madvise", "madvise", "never"]),
                                           ("", []), (None, [])])
def test_selector_options(text, options):
    assert selector_options(text) == options
