import pytest

from tunehost.cpulist import MAX_CPUS, format_cpu_list, parse_cpu_list
from tunehost.facts.cpu import online_cpus
from tunehost.errors import TunehostError
from tunehost.host import open_host


@pytest.mark.parametrize("text, cpus", [("0", [0]), ("0-3", [0, 1, 2, 3]), ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
                                        ("3,1,2", [1, 2, 3])])
def test_parse_and_format_round_trip(text, cpus):
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@pytest.mark.parametrize("bad", ["", "a", "1-", "3-1", "-2", "0,,1", "0-3;4", "1_0", "+3", "\u00b2"])
def test_invalid_cpu_lists_are_one_clear_error(bad):
    with pytest.raises(TunehostError, match="CPU list"):
        parse_cpu_list(bad)


def test_online_cpus_unknown_or_garbled(make_snapshot):
    assert online_cpus(open_host(make_snapshot())) is None
    assert online_cpus(open_host(make_snapshot(fs={"/sys/devices/system/cpu/online": "zz"}))) is None
    assert online_cpus(open_host(make_snapshot(fs={"/sys/devices/system/cpu/online": "0-19\n"}))) == list(range(20))


@pytest.mark.parametrize("huge", ["0-999999", "0-100000000", "8192", "0-18446744073709551616", "9" * 5000])
def test_cpu_numbers_beyond_the_kernel_are_one_clear_error(huge):
    # x86-64's NR_CPUS_RANGE_END (8192) is the most any kernel has: never a range of a million CPUs to expand
    with pytest.raises(TunehostError, match="beyond the 8192 CPUs a Linux kernel can have"):
        parse_cpu_list(huge)
    assert parse_cpu_list("0-8191")[-1] == MAX_CPUS - 1
