# Worked solutions to the exercises of notebook 03.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
longer = activation_bytes(build(4 * num_rows), batch_size, 4 * num_rows)
growth = longer / activations
assert growth >= 3.9, f"four times the tokens should keep about four times as much, got x{growth}"
print(f"{4 * num_rows} tokens keep {longer / 2**20:.1f} MiB of activations: x{growth:.2f} of "
      f"{num_rows} tokens. Linear, not quadratic: PyTorch's fused attention saves no T x T "
      f"matrix for backward. Weights, gradients and AdamW state barely move (only the position "
      f"table grows).")

# %% Exercise 2
from accelerate.utils import find_executable_batch_size

halving = []


@find_executable_batch_size(starting_batch_size=128, reduce_batch_size_fn=lambda: halving[-1] // 2)
def fits_40(size):
    halving.append(size)
    if size > 40:
        raise RuntimeError("CUDA out of memory.")  # a message Accelerate recognizes
    return size


found = fits_40()
assert all(b == a // 2 for a, b in zip(halving, halving[1:], strict=False)), halving
assert found == halving[-1] <= 40 < halving[-2], halving
print(f"halving tried {halving} and found {found}; x0.9 tries more sizes and finds one "
      "closer to 40.")

# %% Exercise 3
live = LiveActivations()
with live, torch.no_grad():
    losses = [F.cross_entropy(model(inputs), targets) for _ in range(leak_steps)]
assert live.live_bytes() == 0, live.live_bytes()
print(f"under torch.no_grad(), {leak_steps} kept losses hold {live.live_bytes()} bytes: "
      "no graph, so nothing is saved.")
