# Worked solutions to the exercises of notebook 00.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
l4 = "NVIDIA L4, 23034, 8.9, 550.54"  # name, memory MiB, compute capability, driver
two_l4 = f"{l4}\n{l4}"
l4_rec = hardware.recommend(hardware.detect_hardware(nvidia_smi=two_l4, topology=""))
expected_workers, _ = hardware.dataloader_workers(hw.logical_cpus, 2)  # this machine's CPUs
assert (l4_rec.mixed_precision, l4_rec.num_processes) == ("bf16", 2), l4_rec
assert l4_rec.num_workers == expected_workers, l4_rec.reasons["num_workers"]
print(f"Two L4s: mixed_precision={l4_rec.mixed_precision!r} (8.9 has bf16 tensor cores), "
      f"num_processes={l4_rec.num_processes}, num_workers={l4_rec.num_workers} "
      f"({l4_rec.reasons['num_workers']})")

# %% Exercise 2
import os

planted = {"MY_SERVICE_API_KEY": "hunter2", "OMP_NUM_THREADS": "1"}
before = {name: os.environ.get(name) for name in planted}  # put back afterwards
os.environ.update(planted)
allowed = software.SHOWN_NAMES  # the allow-list that decides which values are shown
try:
    seen = software.environment_signals()  # step 3's table, rerun
    software.SHOWN_NAMES = allowed - {"OMP_NUM_THREADS"}  # off the list: is it hidden now?
    seen_off_list = software.environment_signals()
finally:
    software.SHOWN_NAMES = allowed
    for name, value in before.items():
        if value is None:
            del os.environ[name]
        else:
            os.environ[name] = value
assert "hunter2" not in seen.values() and seen["MY_SERVICE_API_KEY"] == software.REDACTED, seen
assert seen["OMP_NUM_THREADS"] == "1", seen  # on the list: its value is shown
assert seen_off_list["OMP_NUM_THREADS"] == software.REDACTED, "the list did not decide"
print(f"software.environment_signals listed MY_SERVICE_API_KEY as {seen['MY_SERVICE_API_KEY']}. "
      f"OMP_NUM_THREADS is shown as {seen['OMP_NUM_THREADS']!r}: it is on software.SHOWN_NAMES. "
      f"Taken off that list, it is {seen_off_list['OMP_NUM_THREADS']}.")

# %% Exercise 3
editor = platform.detect_platform({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"})
saved = platform.detect_platform({"KAGGLE_KERNEL_RUN_TYPE": "Batch"})
differ = [field for field in ("interactive", "kaggle_batch", "evidence")
          if getattr(editor, field) != getattr(saved, field)]
kaggle_working = platform.platform_dirs(saved).working_dir
assert editor.name == saved.name == "kaggle" and saved.kaggle_batch and not editor.kaggle_batch
assert differ == ["interactive", "kaggle_batch", "evidence"], differ
print(f"Both runs are platform 'kaggle'; they differ in {', '.join(differ)} "
      f"({editor.evidence} vs {saved.evidence}). Both keep outputs in {kaggle_working}.")
