# Worked solutions to the exercises of notebook 02.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
fp16_model = fresh_model(device)
fp16_optimizer = torch.optim.AdamW(fp16_model.parameters(), lr=learning_rate)
scaler = torch.amp.GradScaler(device.type, growth_interval=2000)  # fp16_step reads it
slow = walk_scaler()
slow_scales = [row["scale"] for row in slow] + [slow[-1]["next_scale"]]
changed = [row["step"] for row in slow if row["next_scale"] != row["scale"]]
grown = [row["step"] for row in walk if row["next_scale"] > row["scale"]]  # growth_interval=2
assert grown and not set(grown) & set(changed), f"{grown} grew the scale at 2, not at 2000"
halved_only = slow_scales[-1] == slow_scales[0] / 2 ** len(changed)  # no step grew it
assert outlier_step in changed and halved_only, slow_scales
print(f"growth_interval=2000: the scale changes only at the skipped steps {changed} (halved); "
      f"it never grows in 8 steps: {slow_scales}")

# %% Exercise 2
width, notebook_width = 128, width
wide = {}
for p in ("no", mode):
    with SavedTensors() as kept, torch.autocast(device.type, dtype=half, enabled=p != "no"):
        F.cross_entropy(fresh_model(device)(inputs), targets)
    wide[p] = kept
width = notebook_width  # the notebook's width again
wide_ratio = wide[mode].activation_bytes / wide["no"].activation_bytes
fp32_kept = wide[mode].by_dtype["float32"]
toward = "1" if wide_ratio > ratio else "0.5"  # ratio: step 5, at the notebook's width
assert 0 < wide_ratio < 1 and fp32_kept > 0, "some saved tensors stay fp32 at any width"
print(f"width 128: {mode}/fp32 = {wide_ratio:.3f} (width {width}: {ratio:.3f}), "
      f"so the ratio moves towards {toward}; "
      f"{fp32_kept} bytes stay fp32 (layer norms, softmax, loss)")

# %% Exercise 3
_, bf16_grad = weight_grad(1.0, dtype=torch.bfloat16)
bf16_error = ((bf16_grad - reference).abs().max() / reference.abs().max()).item()
assert bool((bf16_grad != 0).all()) and bf16_error < 0.05, "bf16 keeps the small gradient unscaled"
print(f"bf16 without scaling: the weight gradient survives, within {bf16_error:.2%} of fp32. "
      f"bf16's smallest normal is {torch.finfo(torch.bfloat16).tiny:.1e}, as fp32's: no GradScaler")

# %% Exercise 4
with torch.autocast(device.type, dtype=torch.float16), DtypeTrace() as fp16_trace:
    fresh_model(device)(inputs)  # step 2's batch, in Accelerate's fp16 autocast, by hand


def ran_in_16_bits(records):  # the ops that made a 16-bit tensor, with both formats named "16"
    return [op.replace("bfloat16", "16").replace("float16", "16") for op, dtype in records
            if dtype in ("float16", "bfloat16")]


fp16_ops, mode_ops = ran_in_16_bits(fp16_trace.records), ran_in_16_bits(forward.records)
assert fp16_ops and fp16_ops == mode_ops[: len(fp16_ops)], (fp16_ops, mode_ops)
print(f"fp16 autocast on {device.type}: {len(fp16_ops)} ops made 16-bit tensors, the same ops "
      f"in the same order as in {mode}: {sorted(set(fp16_ops))}")
