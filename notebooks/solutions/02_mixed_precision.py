# Worked solutions to the exercises of notebook 02.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
from freegpu.precision import batches_with_outlier, walk_scaler

fp16_model = fresh_model(device)
fp16_optimizer = torch.optim.AdamW(fp16_model.parameters(), lr=learning_rate)
scaler = torch.amp.GradScaler(device.type, growth_interval=2000)  # read by fp16_step
slow = walk_scaler(fp16_step, scaler, fp16_optimizer,
                   batches_with_outlier(data.train.tensors, batch_size, 8, outlier_step, device))
changed = [row["step"] for row in slow.rows if row["next_scale"] != row["scale"]]
grown = [row["step"] for row in walk.rows if row["next_scale"] > row["scale"]]  # growth_interval=2
assert grown and not set(grown) & set(changed), f"{grown} grew the scale at 2, not at 2000"
halved_only = slow.scales[-1] == slow.scales[0] / 2 ** len(changed)  # no step grew it
assert outlier_step in changed and halved_only, slow.scales
print(f"growth_interval=2000: the scale changes only at the skipped steps {changed} (halved); "
      f"it never grows in 8 steps: {slow.scales}")

# %% Exercise 2
from freegpu.precision import activation_survey

width, notebook_width = 128, width
wide, _ = activation_survey(lambda: fresh_model(device), inputs, targets, ["no", mode])
width = notebook_width  # the notebook's width again
wide_ratio = wide["activation_bytes_ratio"]
fp32_kept = wide["activation_bytes_by_dtype"][mode]["float32"]
narrow_ratio = saved["activation_bytes_ratio"]  # step 5, at the notebook's width
toward = "1" if wide_ratio > narrow_ratio else "0.5"
assert 0 < wide_ratio < 1 and fp32_kept > 0, "some saved tensors stay fp32 at any width"
print(f"width 128: {mode}/fp32 = {wide_ratio:.3f} (width {width}: {narrow_ratio:.3f}), "
      f"so the ratio moves towards {toward}; "
      f"{fp32_kept} bytes stay fp32 (layer norms, softmax, loss)")

# %% Exercise 3
_, bf16_grad = weight_grad(1.0, dtype=torch.bfloat16)
bf16_error = ((bf16_grad - reference).abs().max() / reference.abs().max()).item()
assert bool((bf16_grad != 0).all()) and bf16_error < 0.05, "bf16 keeps the small gradient unscaled"
print(f"bf16 without scaling: the weight gradient survives, within {bf16_error:.2%} of fp32. "
      f"bf16's smallest normal is {torch.finfo(torch.bfloat16).tiny:.1e}, as fp32's: no GradScaler")

# %% Exercise 4
from freegpu.hardware import detect_hardware
from freegpu.precision import measured_mode, pick_mixed_precision

t4 = detect_hardware(nvidia_smi="Tesla T4, 15360, 7.5, 550.54", topology="")
t4_mode, t4_bf16 = measured_mode(t4), pick_mixed_precision(t4, "bf16")
assert t4_mode.mode == "fp16" and t4_bf16.warning is not None, "a T4: fp16, and bf16 warns"
print(f"simulated T4: measured_mode picks {t4_mode.mode!r} ({t4_mode.reason}); a bf16 request "
      f"keeps {t4_bf16.mode!r} and warns: {t4_bf16.warning}")
