# Worked solutions to the exercises of notebook 00.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
v100 = "Tesla V100-SXM2-16GB, 16384, 7.0, 550.54"  # name, memory MiB, compute capability, driver
four = hardware.recommend(hardware.detect_hardware(nvidia_smi="\n".join([v100] * 4), topology=""))
here_workers = hardware.dataloader_workers(hw.logical_cpus, 4)  # this machine's CPUs
assert (four.mixed_precision, four.num_processes) == ("fp16", 4), four
assert four.num_workers == here_workers, (four.num_workers, here_workers)
print(f"Four V100s: mixed_precision={four.mixed_precision!r} (7.0 has fp16 tensor cores, "
      f"no bf16 ones), num_processes={four.num_processes}. num_workers={four.num_workers} comes "
      f"from this machine's {hw.logical_cpus} CPUs, not the V100 box's: run step 5 there.")

# %% Exercise 2
import os

planted = {"MY_SERVICE_API_KEY": "hunter2", "OMP_NUM_THREADS": "1"}
seen = software.environment_signals({**os.environ, **planted})  # step 3's table, both set
assert seen["MY_SERVICE_API_KEY"] == software.REDACTED and "hunter2" not in seen.values(), seen
assert seen["OMP_NUM_THREADS"] == "1", seen  # on the allow-list: its value is shown
off_list = software.environment_signals({"OMP_SCHEDULE": "static"})  # same prefix, off the list
assert off_list["OMP_SCHEDULE"] == software.REDACTED, "the list did not decide"
print(f"software.environment_signals listed MY_SERVICE_API_KEY as {seen['MY_SERVICE_API_KEY']}. "
      f"OMP_NUM_THREADS is shown as {seen['OMP_NUM_THREADS']!r}: it is on the allow-list "
      f"software.SHOWN_NAMES. OMP_SCHEDULE is not on it, so it is {off_list['OMP_SCHEDULE']}.")

# %% Exercise 3
editor = platform.PlatformInfo("kaggle", False, True, "KAGGLE_KERNEL_RUN_TYPE=Interactive")
saved = platform.PlatformInfo("kaggle", True, False, "KAGGLE_KERNEL_RUN_TYPE=Batch")
editor_dirs, saved_dirs = platform.platform_dirs(editor), platform.platform_dirs(saved)
assert editor_dirs == saved_dirs and saved_dirs.working_persists, saved_dirs
print(f"Both runs get the working folder {saved_dirs.working_dir}. The folders are the same. "
      "What differs is who watches: nobody watches a Batch run, and it ends with the notebook. "
      "So a long job must save its checkpoints there by itself (notebook 06).")
