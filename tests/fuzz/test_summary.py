"""The fuzz summary is one short line before pytest's pass count (every target only with -v)."""

from tests.fuzz.profiles import summary_lines


def test_summary_is_one_short_line_however_many_targets():
    tried = {f"tests/fuzz/test_x.py::test_target_number_{i}_with_a_long_name": 25 + i for i in range(300)}
    [line] = summary_lines(tried)
    assert len(line) <= 100 and line.startswith("fuzz: ") and "over 300 targets" in line
    verbose = summary_lines(tried, verbose=True)
    assert len(verbose) == 301 and all(len(v) <= 100 for v in verbose)
    assert summary_lines({}) == []
    assert summary_lines({"a": 3}) == ["fuzz: 3 generated inputs tried over 1 targets (-v lists them)"]
