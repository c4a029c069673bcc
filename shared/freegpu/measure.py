"""Measure what a DataLoader delivers. Introduced in notebook 04 (feeding the device)."""

from __future__ import annotations

import time
import warnings

__all__ = ["loader_throughput"]


def loader_throughput(dataset, epochs: int = 1, **loader_kwargs) -> dict:
    """Samples per second a `DataLoader(dataset, **loader_kwargs)` delivers over `epochs` full passes.

    Worker start-up counts: it is what every epoch pays unless `persistent_workers=True`. Returns
    `samples_per_s`, `first_batch_s` (time to the first batch) and the `warnings` the DataLoader raised.
    """
    from torch.utils.data import DataLoader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = DataLoader(dataset, **loader_kwargs)
        samples, first_batch = 0, None
        start = time.perf_counter()
        for _ in range(epochs):
            for inputs, _targets in loader:
                first_batch = first_batch if first_batch is not None else time.perf_counter() - start
                samples += len(inputs)
        elapsed = time.perf_counter() - start
        del loader  # stops persistent workers
    return {"samples_per_s": samples / elapsed, "first_batch_s": first_batch,
            "warnings": sorted({str(w.message) for w in caught})}
