#!/usr/bin/env python3
"""NCCL all-reduce time and bus bandwidth by message size, as nccl-tests' all_reduce_perf reports
them, through PyTorch's NCCL process group (the GPU machine has PyTorch; nccl-tests is not in
Debian). Run under torchrun, one process per GPU:

  torchrun --standalone --nproc_per_node 2 scripts/allreduce_bw.py [--sizes 4K,64K,1M,16M,64M] [--dtype float32]

Set NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 to force NCCL's socket transport over loopback (a
stand-in for hosts joined by Ethernet). Rank 0 prints one JSON line per size: bytes, the median
time of --iters all-reduces in microseconds, algbw = bytes / time and busbw = algbw * 2 (n - 1) / n
(GB/s, nccl-tests' definitions), and a last line with the transport NCCL chose if NCCL_DEBUG=INFO
said.
"""
import argparse, json, os, statistics

import torch
import torch.distributed as dist


def size_of(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1]]) if s[-1] in mult else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4K,64K,1M,4M,16M,37M,64M")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dt = getattr(torch, a.dtype)
    for s in a.sizes.split(","):
        nbytes = size_of(s)
        x = torch.ones(max(nbytes // torch.tensor([], dtype=dt).element_size(), 1), dtype=dt, device="cuda")
        for _ in range(3):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(a.iters):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(x)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)
        us = statistics.median(times)
        algbw = nbytes / (us * 1e-6) / 1e9
        if rank == 0:
            print(json.dumps({"bytes": nbytes, "dtype": a.dtype, "ranks": n, "us": round(us, 1),
                              "algbw_GBs": round(algbw, 3), "busbw_GBs": round(algbw * 2 * (n - 1) / n, 3),
                              "p2p_disabled": os.environ.get("NCCL_P2P_DISABLE") == "1",
                              "shm_disabled": os.environ.get("NCCL_SHM_DISABLE") == "1"}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
