import pytest

from tunehost.facts.chassis import chassis_kind, chassis_label


@pytest.mark.parametrize("chassis, kind, label", [
    (3, "desktop", "desktop"), (35, "desktop", "mini PC"), (10, "laptop", "notebook"), (31, "laptop", "convertible"),
    (23, "server", "rack mount chassis"), (1, None, "other"), (99, None, None), (None, None, None),
])
def test_chassis_kind_and_label(chassis, kind, label):
    assert chassis_kind(chassis) == kind
    assert chassis_label(chassis) == label
