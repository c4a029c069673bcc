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
t4 = detect_hardware(nvidia_smi="Tesla T4, 15360, 7.5, 550.54", topology="")
# step 1's rule
t4_fp16_only = t4.device_kind == "cuda" and not all(g.bf16_tensor_cores for g in t4.gpus)
t4_mode, t4_bf16 = ("fp16" if t4_fp16_only else "bf16"), pick_mixed_precision(t4, "bf16")
assert t4_mode == "fp16" and t4_bf16.warning is not None, "a T4: fp16, and bf16 warns"
print(f"simulated T4: step 1's rule picks {t4_mode!r} (fp16 tensor cores only); a bf16 request "
      f"keeps {t4_bf16.mode!r} and warns: {t4_bf16.warning}")
