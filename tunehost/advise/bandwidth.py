"""Memory bandwidth: the token-generation ceiling a bandwidth implies for a model (pure).

Generating one token reads every weight that token uses once, so decode speed is bounded by
bandwidth / bytes-read-per-token. `tg_ceiling` is that bound; the probe that measures a bandwidth is
tunehost.probes.bandwidth (measuring is the probes layer's job, planning never touches the machine).
"""

from __future__ import annotations

from tunehost.model import ModelFacts
from tunehost.probes.bandwidth import GB


def bytes_per_token(model: ModelFacts) -> int:
    """Weight bytes read to generate one token.

    Dense: every weight except the token-embedding table (a lookup reads one row), unless the output reuses it.
    MoE: the non-routed weights (attention, router, shared experts, dense layers, output) plus the used fraction
    `expert_used_count / expert_count` of the routed-expert bytes, rounded to the nearest byte.
    """
    w = model.weights
    embd_skipped = 0 if w.output_tied else w.token_embd
    if not model.is_moe:
        return w.total - embd_skipped
    return w.non_routed - embd_skipped + active_expert_bytes(model, w.routed_experts)


def active_expert_bytes(model: ModelFacts, routed_bytes: int) -> int:
    """The share of `routed_bytes` one token touches: routed_bytes * used / count, nearest byte."""
    if not model.expert_count:
        return routed_bytes
    used = model.expert_used_count or model.expert_count
    return (routed_bytes * used + model.expert_count // 2) // model.expert_count


def cpu_moe_bytes_per_token(model: ModelFacts, n_cpu_moe: int) -> int:
    """Bytes per token read from host RAM under `--n-cpu-moe n_cpu_moe` (the used experts of the first N layers)."""
    routed = model.weights.routed_experts_per_layer[: max(0, n_cpu_moe)]
    return active_expert_bytes(model, sum(routed))


def tg_ceiling(bandwidth_gbps: float, bytes_per_tok: int) -> float:
    """Upper bound on generated tokens/s when `bytes_per_tok` must stream from memory at `bandwidth_gbps` (GB/s)."""
    if bytes_per_tok <= 0:
        raise ValueError("bytes per token must be positive")
    return bandwidth_gbps * GB / bytes_per_tok


def split_tg_ceiling(parts: list[tuple[int, float]]) -> float:
    """Ceiling when each token reads `bytes` at `gbps` from several memories in turn: 1 / sum(bytes_i / bw_i).

    E.g. [(gpu_bytes, 900.0), (cpu_bytes, 60.0)] for a model split with --n-cpu-moe.
    """
    seconds = sum(b / (bw * GB) for b, bw in parts if b)
    if seconds <= 0:
        raise ValueError("no bytes to read")
    return 1.0 / seconds
