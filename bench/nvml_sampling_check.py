"""What the agent's NVML reader samples on this machine's real cards, read only.

For every card: its name, MIG mode (current and pending) and, where MIG is on, the MIG
instances NVML lists; then two reads through the agent's own reader (scheduler/agent/nvml.py)
a second apart, which lists the cards as the agent offers them (a card with MIG on as its
instances, each under its own index, with its MIG UUID and its card): each process's memory
and SM busy %, the memory controller's busy %
(utilization.memory), PCIe traffic (tx + rx) and GPM's DRAM bandwidth. With `--load N` it
first starts N small CUDA processes (where torch or cupy is installed), each in a session of
its own, and also prints the per-job samples the agent would report for them.

It changes nothing on a card: no MIG, compute-mode, clock or persistence setting is touched,
only queried. On a machine without an NVIDIA driver it prints "no NVIDIA driver" and exits 0.

    .venv/bin/python bench/nvml_sampling_check.py [--load 2] [--seconds 20]

Ends with one JSON line of everything read.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from scheduler.agent.errors import GpuReadError
from scheduler.agent.nvml import NvmlReader, load_pynvml
from scheduler.agent.protocol import GpuInfo
from scheduler.agent.sampling import JobProcesses, Sampler

# A small CUDA process: about 1 GiB of memory and a matrix product in a loop, until killed.
TORCH_LOAD = (
    "import torch, sys\n"
    "x = torch.randn(8192, 8192, device=f'cuda:{sys.argv[1]}')\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    y = x @ x\n"
    "    torch.cuda.synchronize()\n"
)
CUPY_LOAD = (
    "import cupy, sys\n"
    "cupy.cuda.Device(int(sys.argv[1])).use()\n"
    "x = cupy.random.rand(8192, 8192, dtype=cupy.float32)\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    y = x @ x\n"
    "    cupy.cuda.Stream.null.synchronize()\n"
)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def mig_state(nvml: Any, handle: Any) -> dict[str, Any]:
    """MIG mode and instances, by queries only (NotSupported: a card without MIG)."""
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError as exc:
        return {"mig": None, "why": str(exc)}
    state: dict[str, Any] = {"mig": bool(current), "mig_pending": bool(pending), "instances": []}
    if current:
        for slot in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                instance = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError:
                continue  # an empty slot
            memory = nvml.nvmlDeviceGetMemoryInfo(instance)
            state["instances"].append(
                {"uuid": _text(nvml.nvmlDeviceGetUUID(instance)), "memory_mib": memory.total >> 20}
            )
    return state


def start_load(count: int, cards: int, seconds: float) -> list[subprocess.Popen[str]]:
    """`count` small CUDA processes, on the cards in turn (none where no CUDA library is
    found), each ready (its memory taken) or given up on after `seconds`."""
    loads = {"torch": TORCH_LOAD, "cupy": CUPY_LOAD}
    usable = [
        module
        for module in loads
        if subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True
        ).returncode
        == 0
    ]
    if not usable:
        print("no torch or cupy here: no CUDA load started")
        return []
    code = loads[usable[0]]
    started = []
    for n in range(count):
        started.append(
            subprocess.Popen(
                [sys.executable, "-c", code, str(n % cards)],
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + seconds
    for process in started:
        assert process.stdout is not None
        while time.monotonic() < deadline and process.poll() is None:
            if process.stdout.readline().strip() == "ready":
                break
    return started


def stop_load(started: list[subprocess.Popen[str]]) -> None:
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def show(gpus: list[GpuInfo]) -> None:
    for gpu in gpus:
        if gpu.mig_uuid is not None:
            print(
                f"GPU {gpu.index}: MIG instance {gpu.mig_uuid} of GPU {gpu.mig_parent_index}, "
                f"{gpu.memory_total_mib} MiB"
            )
        print(
            f"GPU {gpu.index} {gpu.name}: SM {gpu.utilization_pct}%, memory controller "
            f"{gpu.memory_busy_pct}%, PCIe {gpu.pcie_mbps} MB/s, DRAM bandwidth "
            f"{gpu.dram_bw_pct}%, memory {gpu.memory_used_mib}/{gpu.memory_total_mib} MiB"
        )
        for p in gpu.processes:
            print(f"    pid {p.pid}: {p.used_memory_mib} MiB, SM {p.sm_pct}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=0, help="small CUDA processes to start")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long they may warm up")
    args = parser.parse_args()
    try:
        nvml = load_pynvml()
    except GpuReadError as exc:
        print(f"no NVIDIA driver to ask: {exc}")
        return 0
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        print(f"no NVIDIA driver ({exc})")
        return 0
    found: dict[str, Any] = {"driver": _text(nvml.nvmlSystemGetDriverVersion()), "cards": []}
    try:
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            card = {"index": index, "name": _text(nvml.nvmlDeviceGetName(handle))}
            card.update(mig_state(nvml, handle))
            print(f"GPU {index} {card['name']}: MIG {card['mig']} {card.get('instances', '')}")
            found["cards"].append(card)
    finally:
        nvml.nvmlShutdown()
    cards = len(found["cards"])
    load = start_load(args.load, cards, args.seconds) if args.load and cards else []
    reader = NvmlReader(library=nvml)
    try:
        reader.read()  # GPM's first sample; per-process samples from here on
        time.sleep(1.0)
        gpus = reader.read()
        print(f"the agent offers {len(gpus)} cards: {', '.join(str(g.index) for g in gpus)}")
        show(gpus)
        jobs = [JobProcesses(f"load-{n}", p.pid, (n % cards,)) for n, p in enumerate(load)]
        samples = Sampler().samples(gpus, jobs) if jobs else []
        for sample in samples:
            print(f"job {sample.job_id}: {sample.model_dump_json()}")
        found["gpus"] = [gpu.model_dump() for gpu in gpus]
        found["samples"] = [sample.model_dump() for sample in samples]
    finally:
        reader.close()
        stop_load(load)
    print(json.dumps(found, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
