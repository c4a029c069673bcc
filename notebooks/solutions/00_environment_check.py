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

os.environ["MY_SERVICE_API_KEY"] = "hunter2"
os.environ["OMP_NUM_THREADS"] = "1"
try:
    seen = software.environment_signals()
    secret_shown = seen.get("MY_SERVICE_API_KEY")
    threads_shown = seen.get("OMP_NUM_THREADS")
    key_is_secret = software.is_secret_name("MY_SERVICE_API_KEY")
finally:
    del os.environ["MY_SERVICE_API_KEY"], os.environ["OMP_NUM_THREADS"]
assert secret_shown == software.REDACTED and key_is_secret, secret_shown
assert threads_shown == "1" and "OMP_NUM_THREADS" in software.SHOWN_NAMES, threads_shown
print(f"MY_SERVICE_API_KEY is listed as {secret_shown} by software.environment_signals "
      f"(its name looks secret); OMP_NUM_THREADS is shown as {threads_shown!r} "
      "because it is on software.SHOWN_NAMES.")

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
