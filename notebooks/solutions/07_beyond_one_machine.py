# Worked solutions to the exercises of notebook 07.
# The build runs them after the notebook, in its kernel.

# %% Exercise 1
text = Path("nl.py").read_text().replace("num_processes=2", "num_processes=1")
# no launcher sets GROUP_RANK now: None
text = text.replace('int(os.environ["GROUP_RANK"])', 'os.environ.get("GROUP_RANK")')
Path("nl_one.py").write_text(text.replace('"nl"', 'f"nl_one_{sys.argv[1]}"'))  # a folder each
port = free_port()  # nl.py needs a port; with one process, nothing listens on it
run_launches({f"machine {r}": f"python nl_one.py {r} {port}".split() for r in range(2)},
             timeout=launch_timeout_s, env=one_thread)
alone = [read_reports(f"nl_one_{r}", 1)[0] for r in range(2)]
assert [(a["machine_rank"], a["world_size"]) for a in alone] == [(None, 1), (None, 1)], alone
print(f"Not 1 x 2 = 2: each machine ran alone, world sizes {[a['world_size'] for a in alone]}.")
print("With num_processes=1, notebook_launcher calls the function in the calling process.")
print("It starts no new process and ignores num_nodes.")

# %% Exercise 2
text = Path("multi_node.yaml").read_text()
Path("four_nodes.yaml").write_text(text.replace("num_machines: 2", "num_machines: 4"))  # 16 GPUs
four = load_config_from_file("four_nodes.yaml")
assert four.num_processes // four.num_machines == 4
print(f"4 machines x 4 GPUs: num_processes is still {four.num_processes} (the total); "
      f"each machine starts {four.num_processes // four.num_machines}.")

# %% Exercise 3
text_1 = Path("multi_node.yaml").read_text().replace("machine_rank: 0", "machine_rank: 1")
Path("machine_1.yaml").write_text(text_1)
zero = load_config_from_file("multi_node.yaml").to_dict()
one = load_config_from_file("machine_1.yaml").to_dict()
differ = sorted(key for key in zero if zero[key] != one[key])
assert differ == ["machine_rank"], differ
print(f"Only {differ} differs: every machine names machine 0's address and the same totals.")

# %% Exercise 4
def held_per_weight(name: str, ranks: int) -> float:  # fp32 bytes: weight 4, gradient 4, AdamW 8
    split = {"DDP": (1, 1, 1), "ZeRO-2": (1, ranks, ranks), "ZeRO-3": (ranks, ranks, ranks)}[name]
    return sum(size / parts for size, parts in zip((4, 4, 8), split, strict=True))


for name, measured in zero_bytes.items():  # the rule gives back what step 4 measured on 2 ranks
    assert held_per_weight(name, 2) * weights == sum(measured), (name, measured)
print("1 billion weights on 8 GPUs, on each rank:")
for name in zero_bytes:
    print(f"  {name:6}: {held_per_weight(name, 8):4.1f} GB")  # 1e9 weights x bytes per weight
