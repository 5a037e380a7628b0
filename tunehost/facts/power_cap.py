"""What a GPU power cap costs token generation: the share of the speed at the default limit that a card keeps at an
enforced limit of `ratio` x its default (NVML enforced/default limit, amdgpu hwmon power1_cap/power1_cap_default).

Single-stream decode reads weights at memory bandwidth and needs little core power, so a moderate cap costs almost
nothing; below about half the default the core clocks fall far enough that decode slows, and near the floor it
collapses. The points are published sweeps of one model on one card at several limits (llama.cpp, decode t/s):

  ratio  kept   run
  0.90   1.00   RTX 5060 Ti, Qwen2.5-Coder-7B, 162 of 180 W: 81.4 vs 81.2 t/s    [1]
  0.83   0.99   RTX 5060 Ti, 150 of 180 W: 80.4 t/s                             [1]
  0.86   0.99   6x RTX 3090, MiniMax-M2.5 IQ2_M, 300 of 350 W: 72.1 vs 72.6      [2]
  0.71   0.97   250 of 350 W: 70.7                                               [2]
  0.57   0.94   200 of 350 W: 68.3                                               [2]
  0.43   0.86   150 of 350 W: 62.6                                               [2]
  0.29   0.17   100 of 350 W: 12.1                                               [2]
  0.83   1.00   RTX PRO 6000 Blackwell, Llama 2 7B Q4_0, 500 of 600 W: 279.0 vs 278.95   [6]
  0.58   0.99   350 of 600 W: 274.8                                              [6]
  0.50   0.93   300 of 600 W: 260.4                                              [6]
  0.42   0.85   250 of 600 W: 236.9                                              [6]
  0.33   0.68   200 of 600 W: 189.8                                              [6]
  0.71   1.00   2x RTX A4000 (layer split), Qwen3-Coder-30B-A3B, 100 of 140 W     [7]

[1] https://inventivehq.com/blog/gpu-power-limit-tokens-per-watt
[2] https://llmgarage.ai/power-limit-tokens-per-second-benchmark
[6] https://github.com/AUGMXNT/llm-tracker.info-vault (RTX PRO 6000.md)
[7] https://github.com/rammsguns/llm-rig (TUNING.md)

A model with recurrent layers (Qwen3.5/3.6, Qwen3-Next: their Gated DeltaNet layers) decodes compute-bound on a GPU,
and a cap that lowers the core clock costs it much more (llama-server, Qwen3.6-27B, issue 33's grown set):

  ratio  kept   run
  0.86   1.03   RTX 3090, 300 of 350 W: 33.0 vs 32.0 t/s                        [3]
  0.71   0.99   250 of 350 W: 31.7                                               [3]
  0.57   0.64   200 of 350 W: 20.6                                               [3]
  0.43   0.26   150 of 350 W: 8.3                                                [3]
  0.85   0.95   RTX 3090 (water-cooled), 330 of ~388 W: 36.35 vs 38.23           [4]
  0.59   0.66   230 of ~388 W: 25.15                                             [4]
  0.89   1.00   RTX 4090, 400 of 450 W: 51.96 vs 51.96                           [5]
  0.67   0.97   300 of 450 W: 50.16                                              [5]
  0.56   0.89   250 of 450 W: 46.37                                              [5]
  0.67   0.95   RTX 5090, Qwen3.8-27B, 400 of 600 W: 71.2 vs 74.8                [8]

[3] https://jeanfbrito.github.io/posts/rtx-3090-power-limit-sweet-spot/
[4] https://github.com/noonghunna/club-3090 (issue #58, its docs/HARDWARE.md)
[5] https://github.com/noonghunna/club-3090 (docs/img/power-cap-4090-qwen36.py)
[8] https://github.com/sudoingX/qwen38-mtp (sweeps/rtx-5090.md)

The 4090 has about twice a 3090's compute for the same bandwidth, so it is less compute-bound: CAP_SHARE_COMPUTE
spans both. CAP_SHARE below interpolates them with a margin either side (one card and one rig each: a band, not a point). The
six 3090s split the layers, so each card works a sixth of every token and its cap binds less than a single card's:
below 0.7 of the default the low end is widened to hold issue 33's single RTX 3090 at 200 of 350 W (77.5-88.6 t/s on
Qwen3-Coder-30B-A3B, where the same band at the default limit starts at 109). Every sweep point in
tests/advise/data/published_tg.csv lies inside both tables: each is the envelope of that first table and
tunehost.advise.calibration.fit_cap_share on the points (the RTX PRO 6000 keeps 0.68 at a third of its default, far
above the first table's 0.52: a card with a large default limit has room below it). Leave-one-source-out refits them
without the left-out source. Pure: no I/O; used by the gpu-power-cap check and by advise's band
(tunehost.advise.ceiling.tg_band).
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("published power-limit sweeps of llama.cpp decode (RTX 5060 Ti, 6x RTX 3090, RTX PRO 6000, 2x RTX A4000; "
          "docs/checks.md)")
SOURCE_COMPUTE = ("published power-limit sweeps of a hybrid model's llama.cpp decode (RTX 3090 x2, RTX 4090 and RTX 5090 "
                  "on Qwen3.6/3.8-27B; docs/checks.md)")
# an enforced limit below this share of the default is reported (gpu-power-cap) and named in advise's band
POWER_CAP_NOTICE = 0.9
# (enforced / default limit, lowest share kept, highest share kept): piecewise linear in between, ascending ratio
CAP_SHARE: tuple[tuple[float, float, float], ...] = (
    (0.20, 0.02, 0.73),
    (0.29, 0.10, 0.73),
    (0.43, 0.50, 0.984),
    (0.57, 0.70, 1.00),
    (0.71, 0.90, 1.00),
    (0.85, 0.94, 1.00),
    (1.00, 1.00, 1.00),
)
# the same for compute-bound decode (a model with recurrent layers on a GPU): the sweeps [3]-[5] above
CAP_SHARE_COMPUTE: tuple[tuple[float, float, float], ...] = (
    (0.20, 0.02, 0.309),
    (0.29, 0.02, 0.35),
    (0.43, 0.20, 0.90),
    (0.57, 0.55, 0.95),
    (0.71, 0.85, 1.00),
    (0.85, 0.90, 1.00),
    (1.00, 1.00, 1.00),
)


@dataclass(frozen=True)
class CapShare:
    """The share of the default-limit token-generation speed kept at a cap: low..high."""

    ratio: float
    low: float
    high: float
    compute_bound: bool = False

    def text(self) -> str:
        if self.low >= 0.995:
            return "token generation keeps its speed (published sweeps lose under 1 % this close to the default)"
        return (f"token generation keeps about {self.low:.0%}-{self.high:.0%} of its speed at the default limit "
                f"({SOURCE_COMPUTE if self.compute_bound else SOURCE})")


def tg_share_at_cap(ratio: float, *, compute_bound: bool = False,
                    table: tuple[tuple[float, float, float], ...] | None = None) -> CapShare:
    """The share of TG speed kept at an enforced limit of `ratio` x the default (clamped to the table's range);
    `compute_bound`: decode of a model with recurrent layers on a GPU (CAP_SHARE_COMPUTE). `table` replaces the
    table (calibration experiments: tunehost.advise.calibration.fit_cap_share)."""
    table = table or (CAP_SHARE_COMPUTE if compute_bound else CAP_SHARE)
    r = min(max(ratio, table[0][0]), 1.0)
    for (r0, lo0, hi0), (r1, lo1, hi1) in zip(table, table[1:]):
        if r0 <= r <= r1:
            t = (r - r0) / (r1 - r0)
            return CapShare(ratio, round(lo0 + t * (lo1 - lo0), 3), round(hi0 + t * (hi1 - hi0), 3), compute_bound)
    return CapShare(ratio, 1.0, 1.0, compute_bound)


__all__ = ["CAP_SHARE", "CAP_SHARE_COMPUTE", "CapShare", "SOURCE", "SOURCE_COMPUTE", "tg_share_at_cap"]
