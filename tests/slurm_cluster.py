"""A real two-node SLURM cluster on localhost, in a scratch folder (nothing in /etc), for the tests that need one.

`slurm` (a session fixture, imported into tests/conftest.py as `slurm_fixture`: one cluster for the
session, started where a test or notebook 07's run first asks for it) yields `(env, folder)`:
`env["SLURM_CONF"]` points at the scratch slurm.conf, so sbatch, sinfo and scontrol find the controller. munged
runs with its own key and socket, slurmctld and two slurmd nodes (node1, node2) on 127.0.0.1. Every daemon is
stopped by its own pid afterwards, even on failure. Needs root (slurmd) and `apt-get install -y slurm-wlm munge`
(.ci/run); `needs_slurm` and `needs_root` skip a test, saying why. Used by tests/lanes/test_cluster_starter.py
(the starter's train.sbatch) and the session's runs of notebook 07, English and zh (tests/conftest.py: its SLURM
step, executed with this SLURM_CONF in the kernel's environment).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent  # accelerate and python of this environment
SLURM_TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
MISSING = [t for t in SLURM_TOOLS if shutil.which(t) is None]
needs_slurm = pytest.mark.skipif(
    bool(MISSING), reason=f"SLURM not installed (no {', '.join(MISSING)}): apt-get install -y slurm-wlm munge")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the scratch SLURM cluster runs its daemons as root")
ENV = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1",
       "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# MinJobAge=4: `sbatch --wait` polls 2, 10 and 42 s after submitting, then every 32 s, while it is under
# MinJobAge/2 (default 300); at 4 it polls every 2 s, so a 10 s job returns at about 12 s, not 42.
SLURM_CONF = """ClusterName=course
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=4
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPort={p0}
SlurmdPort={p1}
NodeName=node[1-2] NodeHostname={host} NodeAddr=127.0.0.1 Port={p1}-{p2} CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="session", name="slurm")
def slurm_fixture(tmp_path_factory):
    """A two-node SLURM cluster on localhost in a scratch folder; yields the environment for its clients."""
    if MISSING or os.geteuid() != 0:
        pytest.skip(f"no scratch SLURM cluster here: {'missing ' + ', '.join(MISSING) if MISSING else 'not root'}")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir()
    d.chmod(0o700)  # munged refuses a socket folder others can write to
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    p0 = free_port()
    p1 = p0 + 1  # slurmd ports p1 (node1) and p1 + 1 (node2); SlurmdPort is the default
    (d / "slurm.conf").write_text(SLURM_CONF.format(host=socket.gethostname(), d=d, p0=p0, p1=p1, p2=p1 + 1))
    env = {**ENV, "SLURM_CONF": str(d / "slurm.conf")}
    conf = ["-f", str(d / "slurm.conf")]
    pid_files = [d / "munged.pid", d / "slurmctld.pid", d / "slurmd-node1.pid", d / "slurmd-node2.pid"]
    try:
        subprocess.run(["munged", "--force", f"--socket={d}/munge.socket", f"--key-file={key}",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/log/munged.log",
                        f"--seed-file={d}/munged.seed"], env=env, check=True, timeout=30)
        subprocess.run(["slurmctld", *conf], env=env, check=True, timeout=30)
        for node in ("node1", "node2"):
            subprocess.run(["slurmd", *conf, "-N", node], env=env, check=True, timeout=30)
        for _ in range(100):  # idle about 3 s after the start
            out = subprocess.run(["sinfo", "-h", "-o", "%T %D"], env=env, capture_output=True, text=True)
            if out.stdout.split() == ["idle", "2"]:
                break
            time.sleep(0.3)
        else:
            logs = "\n".join(p.read_text()[-1500:] for p in (d / "log").iterdir())
            pytest.fail(f"the two nodes never became idle: {out.stdout!r} {out.stderr!r}\n{logs}")
        yield env, d
    finally:  # always stop every daemon we started, by its own pid, and wait until each has gone
        pids = [int(p.read_text().split()[0]) for p in reversed(pid_files) if p.exists()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for _ in range(100):
            if not any(Path(f"/proc/{pid}").exists() for pid in pids):
                break
            time.sleep(0.1)
