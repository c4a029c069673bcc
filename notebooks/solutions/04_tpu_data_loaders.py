# Worked solutions to the exercises of notebook 04.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
free = TensorDataset(*dataset.tensors)  # the same samples, no work per sample
counts = sorted({0, 2, rule_workers})
seconds = measure.interleaved_timings({n: partial(one_epoch, free, num_workers=n) for n in counts},
                                      repeats=3, warmup=0)
cheap = {n: measure.spread([len(free) / t for t in seconds[n]]) for n in counts}
for n, s in cheap.items():
    print(f"num_workers={n} {s['median']:.0f} samples/s (min {s['min']:.0f}, max {s['max']:.0f})")
winner = max(counts, key=lambda n: cheap[n]["median"])
alone, costly = cheap[0], speeds[0]  # the loop loads by itself
assert cost_ms == 0 or alone["min"] > costly["max"], "no work per sample: num_workers=0 is faster"
print(f"With cost_ms=0 the fastest here is num_workers={winner}. num_workers=0 loads "
      f"{alone['median']:.0f} samples/s, against {costly['median']:.0f} at cost_ms={cost_ms}. With "
      "no work per sample, workers have nothing to do in parallel: they only add start-up and "
      "pickle every batch back.")

# %% Exercise 2
n = len(data.train)
kept_shapes = {len(x) for x, _ in DataLoader(data.train, batch_size=50)}
dropped_shapes = {len(x) for x, _ in DataLoader(data.train, batch_size=50, drop_last=True)}
assert dropped_shapes == {50}, dropped_shapes
assert len(kept_shapes) == (1 if n % 50 == 0 else 2), kept_shapes
print(f"{n} digits in batches of 50: {len(kept_shapes)} batch shape(s) {sorted(kept_shapes)} "
      f"without drop_last, {len(dropped_shapes)} with it. On XLA each shape is one more compile "
      "(and a second step compiles once more while AdamW creates its state, as step 4 counted).")

# %% Exercise 3
np.save(path, rows)  # step 2's file again; MemmapDataset is step 2's class
fresh = {"memory": datasets["memory"], "memmap": MemmapDataset(path, labels)}  # a new map
try:
    epochs = {name: partial(one_epoch, d, shuffle=True, num_workers=2) for name, d in fresh.items()}
    in_workers = measure.interleaved_timings(epochs, repeats=3, warmup=0)
finally:
    path.unlink()
with_two = measure.compare(in_workers["memory"], in_workers["memmap"])  # memmap / memory, samples/s
apart = with_two["min"] > ratios["max"] or with_two["max"] < ratios["min"]
assert with_two["n"] == 3 and with_two["min"] > 0, with_two
print(f"with num_workers=2, memmap / in memory: {with_two['median']:.2f} "
      f"(min {with_two['min']:.2f}, max {with_two['max']:.2f})")
print(f"In the loop (step 2) it was {ratios['median']:.2f}; the change is "
      + ("resolved: the two spreads do not overlap." if apart else
         "not resolved on this machine: the two spreads overlap."))

# %% Exercise 4
probe = "from accelerate import Accelerator; print(Accelerator(cpu=True).distributed_type.value)"
on_cpu = {**os.environ, "PJRT_DEVICE": "CPU"}  # on a TPU this kernel holds the chips
done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=on_cpu)
said = done.stdout.strip()
has_xla = importlib.util.find_spec("torch_xla") is not None
assert said == ("XLA" if has_xla else "NO"), (said, done.stderr[-500:])  # a fresh process
print(f"Accelerator(cpu=True) in a fresh process here: {said}.")
if has_xla:
    print("torch_xla is importable: cpu=True is ignored. On a TPU VM no gloo group forms.")
else:
    print("No torch_xla here: cpu=True stays on the CPU. On a TPU VM the same line gives XLA.")
