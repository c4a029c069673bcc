# Worked solutions to the exercises of notebook 05.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
short = 16
cut = sum(len(ids) > short for ids in train_tokenized["input_ids"])  # these lose tokens at 16


def tokenize_short(examples):
    return tokenizer(*(examples[field] for field in fields), truncation=True, max_length=short)


short_train = task_data.train.map(tokenize_short, batched=True, remove_columns=fields)
fixed_short = DataCollatorWithPadding(tokenizer, padding="max_length", max_length=short)
short_share = {"dynamic": padding_survey(short_train, dynamic)[0],  # step 2's own survey
               "fixed": padding_survey(short_train, fixed_short)[0]}
assert max(map(len, short_train["input_ids"])) <= short, "every review cut at 16 tokens at most"
assert short_share["fixed"] <= share["fixed"], "fixed padding to 16 pads less than to max_length"
print(f"max_length={short}: {cut} of {len(train_tokenized)} training reviews are cut; padding is "
      f"{short_share['dynamic']:.0%} dynamic, {short_share['fixed']:.0%} fixed "
      f"(at {max_length}: {share['dynamic']:.0%}, {share['fixed']:.0%})")

# %% Exercise 2
batches_of_8 = len(DataLoader(train_tokenized, batch_size=8))
accumulated_steps = math.ceil(batches_of_8 / 2) * num_epochs  # one update every 2 micro-batches
plain_steps = len(DataLoader(train_tokenized, batch_size=16)) * num_epochs
assert accumulated_steps == plain_steps, "2 x 8 examples an update: as many as batches of 16"
print(f"batch_size=8, gradient_accumulation_steps=2: {batches_of_8} micro-batches an epoch, "
      f"{accumulated_steps} optimizer steps in {num_epochs} epoch(s), each on 2 x 8 = 16 examples, "
      f"as many as with batches of 16 ({plain_steps})")

# %% Exercise 3
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def first_lr(ratio):  # the learning rate of the first optimizer step, on a throw-away optimizer
    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=learning_rate_used)
    schedule = get_scheduler("linear", probe, num_training_steps=num_training_steps,
                             num_warmup_steps=int(ratio * num_training_steps))
    return schedule.get_last_lr()[0]


events = EventAccumulator(str(out / "logs" / NOTEBOOK))  # what accelerator.log wrote
events.Reload()
logged_lrs = [round(event.value, 6) for event in events.Scalars("train/lr")]
warm_steps = int(warmup_ratio * num_training_steps)
assert first_lr(0) == learning_rate_used, "no warm-up: the first update gets the peak rate"
assert (first_lr(warmup_ratio) < learning_rate_used) == (warm_steps > 0), "warm-up: a smaller one"
print(f"warmup_ratio=0: the first update gets the full {first_lr(0):g}; this run's first got "
      f"{first_lr(warmup_ratio):g}, rising over {warm_steps} steps (train/lr logged: "
      f"{logged_lrs}). The warm-up keeps large updates away "
      "while the new head is random and its gradients are large.")

# %% Exercise 4
from accelerate.data_loader import BatchSamplerShard
from torch.utils.data import BatchSampler, SequentialSampler

from freegpu.launch import launcher_branch

branch = launcher_branch(2, gpu_count=2, environ={"KAGGLE_KERNEL_RUN_TYPE": "Interactive"})
eval_batches = BatchSampler(SequentialSampler(range(len(eval_tokenized))), batch_size, False)
# BatchSamplerShard splits the batches between processes: rank r takes batches r, r + 2, r + 4, ...
# The shorter share repeats a few samples, so both processes get as many batches.
shards = [BatchSamplerShard(eval_batches, 2, rank) for rank in range(2)]
per_process = [sum(len(batch) for batch in shard) for shard in shards]
assert branch.name == "multi_gpu" and branch.processes == 2, branch
assert sum(per_process) >= len(eval_tokenized) == after["count"], "gather keeps the repeats"
print(f"Kaggle T4 x2: {branch.name}, {branch.processes} processes.\n"
      f"The processes score {per_process} examples: plain gather returns {sum(per_process)}, "
      f"gather_for_metrics {len(eval_tokenized)}.")
