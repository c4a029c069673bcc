"""What each rank of a data-parallel run holds, read from the reports its processes wrote. Introduced in notebook 03.

Notebook 03's script `zero_fsdp2.py` trains one model as DDP and as FSDP2 (`reshard_after_forward` True and False)
on CPU processes, and every rank writes the bytes of the weights, gradients and optimizer state it keeps. The
script needs only torch; reading its reports is the part that lives here.
"""

from __future__ import annotations

import statistics

__all__ = ["KINDS", "summarize", "plugin_run"]

KINDS = ("weights", "grads", "optimizer_state")


def _step_times(per_rank: list[dict], warmup: int) -> list[float]:
    """Seconds per step after `warmup` steps; a step lasts as long as its slowest rank."""
    return [max(steps) for steps in zip(*(s["step_times_s"][warmup:] for s in per_rank), strict=True)]


def summarize(reports: list[dict], baseline: str = "ddp", warmup: int = 1) -> dict[str, dict]:
    """Per setup: bytes per rank of each kind, the largest share of `baseline`'s bytes any rank holds (also of the
    weights held between forward and backward), the largest loss difference to `baseline` (any rank, any step), and
    the step time after `warmup` steps (median, spread, and over `baseline`'s median)."""
    rows = {}
    for name in reports[0]["setups"]:
        mine = [r["setups"][name] for r in reports]
        base = [r["setups"][baseline] for r in reports]
        losses = [(a, b) for m, b_ in zip(mine, base, strict=True)
                  for a, b in zip(m["losses"], b_["losses"], strict=True)]
        times = _step_times(mine, warmup)
        between = [m["weights_between_forward_and_backward"] for m in mine]
        rows[name] = {
            "sharded": all(m["sharded"] for m in mine),
            **{f"{kind}_bytes_per_rank": [m[kind] for m in mine] for kind in KINDS},
            "weights_between_forward_and_backward_bytes_per_rank": between,
            **{f"{kind}_share_of_{baseline}": max(m[kind] / b[kind] for m, b in zip(mine, base, strict=True))
               for kind in KINDS},
            f"weights_between_forward_and_backward_share_of_{baseline}":
                max(w / b["weights"] for w, b in zip(between, base, strict=True)),
            f"max_abs_loss_diff_to_{baseline}": max(abs(a - b) for a, b in losses),
            "step_time_s": {"median": statistics.median(times), "min": min(times), "max": max(times),
                            "n": len(times)},
        }
    for row in rows.values():
        row[f"step_time_over_{baseline}"] = row["step_time_s"]["median"] / rows[baseline]["step_time_s"]["median"]
    return rows


def plugin_run(reports: list[dict], baseline: str = "ddp") -> dict:
    """What the Accelerate-plugin run reported on each rank: its distributed type, what `prepare` returned, the bytes
    it held, and whether any rank held less than `baseline` (a shard) of any kind."""
    runs = [r["accelerate_plugin"] for r in reports]
    base = [r["setups"][baseline] for r in reports]
    return {"distributed_type": [run["distributed_type"] for run in runs],
            "prepared_as": [run["prepared_as"] for run in runs],
            **{f"{kind}_bytes_per_rank": [run[kind] for run in runs] for kind in KINDS},
            "sharded": any(run["sharded"] or any(run[k] < b[k] for k in KINDS)
                           for run, b in zip(runs, base, strict=True))}
