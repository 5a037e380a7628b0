"""llama-fit-params --fit-print on: llama.cpp's estimate read and put beside tunehost's budget."""

from __future__ import annotations

from tunehost.advise.flags import FitEstimate, compare_estimate, parse_fit_print

MiB = 1024 * 1024

# common/fit.cpp common_fit_print: one line per device, then Host: "NAME model context compute" in MiB
PRINTED = "CUDA0 8774 891 1102 \nHost 45245 0 24 \n"


def test_parse_fit_print_reads_every_device_and_host():
    est = parse_fit_print("some log line\n" + PRINTED, "llama-fit-params -m x -fitp on")
    assert est is not None
    assert [d.device for d in est.devices] == ["CUDA0", "Host"]
    assert (est.model_mib, est.context_mib, est.compute_mib) == (8774 + 45245, 891, 1126)
    assert est.command.endswith("-fitp on")


def test_parse_fit_print_ignores_anything_else():
    assert parse_fit_print("") is None
    assert parse_fit_print("-c 4096 -ngl -1\nerror: invalid argument: -fitp\n") is None
    assert parse_fit_print("Host 1 2\n") is None  # three numbers or nothing


def test_compare_states_both_and_says_a_disagreement():
    est = parse_fit_print(PRINTED)
    assert isinstance(est, FitEstimate)
    agree = compare_estimate(est, 891 * MiB, 8774 * MiB, 1300 * MiB)
    assert len(agree) == 1 and "CUDA0: weights 8774, KV+state 891, compute 1102" in agree[0]
    hybrid_counted_everywhere = compare_estimate(est, 3267 * MiB, 8774 * MiB, 1300 * MiB)
    assert len(hybrid_counted_everywhere) == 2
    assert "KV cache and recurrent state (3267 MiB) differs from llama.cpp's (891 MiB)" in hybrid_counted_everywhere[1]


def test_host_weights_are_not_compared_only_gpu_weights_are():
    cpu_only = parse_fit_print("Host 282 4352 274\n")  # an mmap'd file: llama.cpp counts only what it copies
    assert cpu_only is not None
    assert len(compare_estimate(cpu_only, 4352 * MiB, 0, 366 * MiB)) == 1
    gpu = parse_fit_print(PRINTED)
    assert gpu is not None
    said = compare_estimate(gpu, 891 * MiB, 12000 * MiB, 1300 * MiB)
    assert len(said) == 2 and "GPU weights (12000 MiB) differs from llama.cpp's (8774 MiB)" in said[1]
