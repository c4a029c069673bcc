# Worked solutions to the exercises of notebook 06.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
scratch.mkdir(parents=True, exist_ok=True)  # the notebook removed its scratch folder at the end
save_file({"images": images, "labels": labels}, scratch / "train.safetensors")
late_kill = 25
killed_25, status_25 = run_script(f"{train} --output_dir exercise_1 --step_sleep_s 0.02", out, env,
                                  kill_when=kill_at("step", late_kill))
resumed_25, _ = run_script(f"{train} --output_dir exercise_1 --resume_from", out, env)
start_25 = next(r for r in resumed_25 if r["event"] == "resumed")
last_step = max(r["step"] for r in killed_25 if r["event"] == "step")
expected = last_step // checkpointing_steps * checkpointing_steps  # the last save before the kill
diff_25 = max_weight_diff(out / "uninterrupted", out / "exercise_1")
assert status_25 == -9 and start_25["checkpoint"] == f"step_{expected}", start_25
assert diff_25 == 0.0, diff_25
print(f"Killed at step {last_step} (epoch {last_step // steps_per_epoch}), the run resumed from "
      f"{start_25['checkpoint']}: it skipped {expected % steps_per_epoch} batches of epoch "
      f"{expected // steps_per_epoch}, and its final weights differ by {diff_25} (identical).")

# %% Exercise 2
plain = (out / "train_resumable.py").read_text().replace(
    "DataLoaderConfiguration(use_seedable_sampler=True)", "DataLoaderConfiguration()")
assert "use_seedable_sampler=True" not in plain
(out / "train_plain.py").write_text(plain)
plain_train = train.replace("train_resumable.py", "train_plain.py")
run_together(out, env, [(f"{plain_train} --output_dir plain_whole", None),
                        (f"{plain_train} --output_dir plain_killed --step_sleep_s 0.02",
                         kill_at("step", kill_at_step))])
plain_resumed, _ = run_script(f"{plain_train} --output_dir plain_killed --resume_from", out, env)
plain_from = next(r["checkpoint"] for r in plain_resumed if r["event"] == "resumed")
plain_diff = max_weight_diff(out / "plain_whole", out / "plain_killed")
# The kill and checkpoint of step 2, where the weights matched exactly: only the sampler differs.
assert plain_from == resumed_from and resume_diff == 0.0, (plain_from, resumed_from, resume_diff)
assert plain_diff > 0, "without the seedable sampler the resumed run should see other batches"
print(f"Without use_seedable_sampler, the run resumed from {plain_from} as in step 2, but ends "
      f"{plain_diff:.3g} away from an unbroken run of the same script: after load_state, the "
      "rest of the epoch is shuffled anew, so the resumed steps see other batches.")

# %% Exercise 3
tight = rehearsal_dirs(kaggle_batch, out / "exercise_3")
tight_work = tight.working_dir.relative_to(out) / NOTEBOOK / "train"
first, _ = run_script(f"{train} --output_dir {tight_work} --time_budget_s 0.2 --step_sleep_s 0.02",
                      out, env)
attach_output(tight.working_dir, tight.input_dir / slug)
folders = attached_checkpoints(tight.input_dir, f"{NOTEBOOK}/train")
found = " ".join(str(p.relative_to(out)) for p in folders)
second, _ = run_script(f"{train} --output_dir {tight_work} --resume_from {found}", out, env)
tight_stop = first[-1]
tight_diff = max_weight_diff(out / "uninterrupted", out / tight_work)
assert tight_stop["event"] == "time_budget", tight_stop
assert 0 < tight_stop["step"] < num_epochs * steps_per_epoch, tight_stop
assert tight_diff == 0.0, tight_diff
print(f"With 0.2 s, version 1 stopped at step {tight_stop['step']} (with {time_budget_s} s: "
      f"{stopped['step']}); version 2 resumed from {tight_stop['checkpoint']} and matches the "
      f"uninterrupted run (max |difference| {tight_diff}).")
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
