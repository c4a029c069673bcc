"""Where training memory goes, and the counters that show it on any device. Introduced in notebook 03.

`state_bytes` counts weights, gradients and optimizer state; `LiveActivations` counts the activations autograd
saved that are still alive (a leak keeps them); `PeakBytes` follows the tensors a block creates and keeps their peak
phase by phase (the peak during backward decides an out-of-memory error); `address_space_cap_supported` says
whether a capped CPU process runs out of memory for real here (step 4's script caps itself); `cuda_peak_bytes` is
the GPU's own peak counter. Notebook 03's steps call these through `memlab`.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable

from .i18n import tr
from .measure import PackHooks

__all__ = ["tensor_bytes", "state_bytes", "LiveActivations", "PeakBytes", "address_space_cap_supported",
           "cuda_peak_bytes"]

MiB = 1024**2


def tensor_bytes(tensors: Iterable) -> int:
    """Bytes of the distinct storages behind `tensors`: views of one storage count once."""
    storages = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        storages[(tensor.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())


def state_bytes(model, optimizer) -> dict[str, int]:
    """Bytes of the model's weights, of its gradients and of the optimizer's state, as they are now.

    Gradients exist after the first `backward`, AdamW's state (two fp32 moments per weight) after the first `step`.
    """
    import torch

    params = list(model.parameters())
    state = [value for per_param in optimizer.state.values() for value in per_param.values()
             if torch.is_tensor(value)]
    return {"weights": tensor_bytes(params), "grads": tensor_bytes(p.grad for p in params if p.grad is not None),
            "optimizer_state": tensor_bytes(state)}


class LiveActivations(PackHooks):
    """Inside the `with` block, remember every activation autograd saves; `live_bytes()` says how much of it lives.

    Autograd frees what it saved once `backward` has used it, or once nobody holds the graph any more. A graph kept
    alive, by a loss tensor stored in a list for instance, keeps everything its forward saved. Parameters are not
    counted: they live anyway.
    """

    def __init__(self):
        self._saved: list[tuple[weakref.ref, tuple[int, int]]] = []

    def _pack(self, tensor):
        base = tensor if tensor._base is None else tensor._base
        if base.is_leaf and base.requires_grad:
            return tensor
        # A detached alias: same storage, no link back to the graph. Returning `tensor` itself would tie a saved
        # output to its own grad_fn, a reference cycle that keeps the graph alive until the garbage collector runs.
        alias = tensor.detach()
        storage = alias.untyped_storage()
        self._saved.append((weakref.ref(alias), (storage.data_ptr(), storage.nbytes())))
        return alias

    def live_bytes(self) -> int:
        """Bytes of the distinct storages, among those saved in the block, that are still alive."""
        alive = {key: key[1] for ref, key in self._saved if ref() is not None}
        return sum(alive.values())


class PeakBytes:
    """Inside the `with` block, the bytes of the tensors torch ops create that are still alive, and their peak in
    each phase. Notebook 03: the peak during backward, where checkpointing runs a block's forward again.

    Any device. A storage that an op returns and that none of its inputs shares is new memory; it counts until it
    is freed. Tensors made before the block (weights, the batch) count zero; gradients made in it count.

        with PeakBytes() as memory:
            loss = F.cross_entropy(model(x), y)
            memory.phase("backward")
            loss.backward()
        memory.peaks  # {"forward": ..., "backward": ...}
    """

    def __init__(self):
        self.live = 0
        self.peaks: dict[str, int] = {"forward": 0}
        self._phase = "forward"
        self._alive: dict[int, tuple[weakref.ref, int]] = {}
        self._mode = None

    def phase(self, name: str) -> None:
        """Start a phase: its peak starts from what is alive now."""
        self._phase, self.peaks[name] = name, self.live

    def _free(self, key: int) -> None:
        _ref, nbytes = self._alive.pop(key)
        self.live -= nbytes

    def _track(self, outputs: list, inputs: list) -> None:
        known = {t.untyped_storage().data_ptr() for t in inputs}  # a view or an in-place op allocates nothing
        for tensor in outputs:
            storage = tensor.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes and key not in known and key not in self._alive:
                self._alive[key] = (weakref.ref(storage, lambda _ref, key=key: self._free(key)), nbytes)
                self.live += nbytes
        self.peaks[self._phase] = max(self.peaks[self._phase], self.live)

    def __enter__(self) -> PeakBytes:
        import torch

        # TorchDispatchMode: the private module precision.py uses too; it sees every aten op, backward included.
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        def tensors(tree) -> list:
            return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]

        track = self._track

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                track(tensors(out), tensors((args, kwargs)))
                return out

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)


def address_space_cap_supported(platform: str | None = None) -> tuple[bool, str]:
    """Whether capping a process's address space (RLIMIT_AS) makes its allocations fail here, and why (Linux
    enforces it; macOS and Windows do not). Notebook 03's `find_batch_size.py` sets the cap."""
    platform = platform or sys.platform
    if platform.startswith("linux"):
        return True, tr("Linux enforces RLIMIT_AS: allocations beyond the cap fail")
    return False, tr("{platform} does not enforce RLIMIT_AS (Linux only: Colab, Kaggle, most servers)").format(
        platform=platform)


def cuda_peak_bytes(fn: Callable[[], object]) -> int | None:
    """Run `fn`; return `torch.cuda.max_memory_allocated()` over the call (`None`, after running it, without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        fn()
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()
