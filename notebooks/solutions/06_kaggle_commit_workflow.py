# Worked solutions to the exercises of notebook 06.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
# CPU kernels are deterministic: there the resumed weights are the unbroken run's, bit for bit.
# On a GPU some kernels are not (step 2): there a small tolerance is the honest check.
tolerance = 0.0 if hw.device_kind == "cpu" else 1e-4
scratch.mkdir(parents=True, exist_ok=True)  # the notebook removed its scratch folder at the end
save_file({"images": images, "labels": labels}, scratch / "train.safetensors")
shutil.rmtree(out / "exercise_1", ignore_errors=True)
killed_25, status_25 = launch(f"{train} --output_dir exercise_1 --step_sleep_s 0.02",
                              kill_at=("step", 25))
resumed_25, _ = launch(f"{train} --output_dir exercise_1 --resume_from")
start_25 = next(r for r in resumed_25 if r["event"] == "resumed")
last_step = max(r["step"] for r in killed_25 if r["event"] == "step")
expected = last_step // checkpointing_steps * checkpointing_steps  # the last save before the kill
diff_25 = weight_diff("uninterrupted", "exercise_1")
assert status_25 == -9 and start_25["checkpoint"] == f"step_{expected}", start_25
assert diff_25 <= tolerance, diff_25
print(f"Killed at step {last_step} (epoch {last_step // steps_per_epoch}), the run resumed from "
      f"{start_25['checkpoint']}: it skipped {expected % steps_per_epoch} batches of epoch "
      f"{expected // steps_per_epoch}, and its final weights differ by {diff_25:.3g}.")

# %% Exercise 2
plain = (out / "train_resumable.py").read_text().replace(
    "DataLoaderConfiguration(use_seedable_sampler=True)", "DataLoaderConfiguration()")
assert "use_seedable_sampler=True" not in plain
(out / "train_plain.py").write_text(plain)
plain_train = train.replace("train_resumable.py", "train_plain.py")
for name in ("plain_whole", "plain_killed"):
    shutil.rmtree(out / name, ignore_errors=True)
launch(f"{plain_train} --output_dir plain_whole")
launch(f"{plain_train} --output_dir plain_killed --step_sleep_s 0.02",
       kill_at=("step", kill_at_step))
plain_resumed, _ = launch(f"{plain_train} --output_dir plain_killed --resume_from")
plain_from = next(r["checkpoint"] for r in plain_resumed if r["event"] == "resumed")
plain_diff = weight_diff("plain_whole", "plain_killed")
# The kill and checkpoint of step 2, where the weights matched: only the sampler differs.
assert plain_from == resumed_from and resume_diff <= tolerance, (plain_from, resumed_from)
assert plain_diff > 10 * tolerance, "without the seedable sampler, other batches after the resume"
print(f"Without use_seedable_sampler, the run resumed from {plain_from} as in step 2, but ends "
      f"{plain_diff:.3g} away from an unbroken run of the same script: after load_state, the "
      "rest of the epoch is shuffled anew, so the resumed steps see other batches.")

# %% Exercise 3
tight = rehearsal_dirs(kaggle_batch, out / "exercise_3")
shutil.rmtree(out / "exercise_3", ignore_errors=True)
tight_work = tight.working_dir.relative_to(out) / NOTEBOOK / "train"
first, _ = launch(f"{train} --output_dir {tight_work} --time_budget_s 0.2 --step_sleep_s 0.02")
shutil.copytree(tight.working_dir, tight.input_dir / slug)  # the output becomes the next input
shutil.rmtree(tight.working_dir)
folders = sorted(tight.input_dir.glob(f"*/{NOTEBOOK}/train/checkpoints"))
found = " ".join(str(p.relative_to(out)) for p in folders)
second, _ = launch(f"{train} --output_dir {tight_work} --resume_from {found}")
tight_stop = first[-1]
tight_diff = weight_diff("uninterrupted", tight_work)
assert tight_stop["event"] == "time_budget", tight_stop
assert 0 < tight_stop["step"] < num_epochs * steps_per_epoch, tight_stop
assert tight_diff <= tolerance, tight_diff
print(f"With 0.2 s, version 1 stopped at step {tight_stop['step']} (with {time_budget_s} s: "
      f"{stopped['step']}); version 2 resumed from {tight_stop['checkpoint']} and ends "
      f"{tight_diff:.3g} from the uninterrupted run.")
shutil.rmtree(scratch)

# %% Exercise 4
tpu_meta = meta | {"enable_gpu": False, "enable_tpu": True, "machine_shape": "TpuV5E8"}  # TPU v5e-8
tpu_bundle = out / "kaggle" / "tpu"
tpu_bundle.mkdir(parents=True, exist_ok=True)
with open(tpu_bundle / "kernel-metadata.json", "w") as f:
    json.dump(tpu_meta, f, indent=2)
assert json.loads((tpu_bundle / "kernel-metadata.json").read_text())["machine_shape"] == "TpuV5E8"
print(f"A TPU kernel sets enable_tpu and machine_shape {tpu_meta['machine_shape']!r} (TPU v5e-8)."
      " Copy your notebook into kaggle/tpu, then: kaggle kernels push -p kaggle/tpu")
