# Worked solutions to the exercises of notebook 08.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
early = keep / "killed_at_12"  # a folder of its own: the lesson's runs stay as they are
train(early, kill_at=12)
_, again = train(early)
early_final = load_file(early / "final" / "model.safetensors")
assert again[0]["resumed_from"] in ("step_10", "step_15"), again[0]  # 15 only if the kill came late
assert all(torch.equal(a[name], early_final[name]) for name in a)
print(f"Killed at step 12, the run resumes from {again[0]['resumed_from']}: "
      "the newest whole checkpoint. The final weights are still bit-exact.")

# %% Exercise 2
_, once_more = train(keep / "killed")
print(f"It resumes from {once_more[0]['resumed_from']} "
      f"and trains {len(once_more) - 1} steps again. "
      "The script does not know that the run had finished: it only looks for checkpoints.")
last = unbroken[-1]["step"]  # 48: the run's last step
assert once_more[0]["resumed_from"] == f"step_{last - last % checkpointing_steps}", once_more[0]

# %% Exercise 3
flags = flags.replace(f"--checkpointing_steps {checkpointing_steps}", "--checkpointing_steps 16")
per_epoch = keep / "one_per_epoch"
train(per_epoch, kill_at=22)
_, repeated = train(per_epoch)
start = int(repeated[0]["resumed_from"][5:])
assert start == 16, repeated[0]
print(f"With one checkpoint per epoch, the run resumes from step {start}: "
      f"it repeats {22 - start} steps.")
