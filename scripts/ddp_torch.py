#!/usr/bin/env python3
"""PyTorch DistributedDataParallel peer for trainer's data parallelism: steps/s of one workload of
peer_torch.py at a global batch, split over the GPUs torchrun starts (one process per GPU).

  torchrun --standalone --nproc_per_node N scripts/ddp_torch.py --peer PATH/peer_torch.py \\
      --workload vgg11_bn_cifar --mode gpu-bf16 --batch 512 [--steps 200] [--warmup 30]

Synthetic data already on each GPU (PyTorch's best case, as in peer_torch.py); each rank trains on
batch / N rows a step; DDP's defaults (25 MiB buckets, all-reduce overlapped with backward).
Modes as peer_torch.py: gpu-fp32 (TF32 off), gpu-tf32, gpu-bf16 (autocast + channels_last + TF32).
Rank 0 prints one JSON line: workload, mode, gpus, global batch, steps/s, final loss, peak MiB.
"""
import argparse, importlib.util, json, os, time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True, help="path of peer_torch.py (its WORK table)")
    ap.add_argument("--workload", default="vgg11_bn_cifar")
    ap.add_argument("--mode", default="gpu-bf16", choices=["gpu-fp32", "gpu-tf32", "gpu-bf16"])
    ap.add_argument("--batch", type=int, default=512, help="global batch, split over the ranks")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    a = ap.parse_args()

    spec = importlib.util.spec_from_file_location("peer_torch", a.peer)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    fn, shape, vocab, n, _, opt_fn, classes = peer.WORK[a.workload]

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if a.batch % world:
        raise SystemExit("--batch %d is not a multiple of %d ranks" % (a.batch, world))
    bs = a.batch // world
    tf32 = a.mode != "gpu-fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    bf16 = a.mode == "gpu-bf16"

    torch.manual_seed(1)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = fn().to(dev)
    g = torch.Generator(device="cpu").manual_seed(100 + rank)
    pool = 8  # batches of synthetic data per rank, cycled
    x = (torch.randint(0, vocab, (pool * bs,) + shape, generator=g) if vocab
         else torch.randn((pool * bs,) + shape, generator=g)).to(dev)
    y = torch.randint(0, classes, (pool * bs,), generator=g).to(dev)
    if bf16:
        model = model.to(memory_format=torch.channels_last)
        if x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = opt_fn(model.parameters())

    def step(i):
        k = i % pool
        xb, yb = x[k * bs:(k + 1) * bs], y[k * bs:(k + 1) * bs]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            out = model(xb)
        loss = F.nll_loss(out.float(), yb)
        loss.backward()
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(a.steps):
        loss = step(i)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**20
    if rank == 0:
        print(json.dumps(dict(work=a.workload, mode=a.mode, gpus=world, batch=a.batch, steps=a.steps,
                              steps_per_s=round(a.steps / dt, 1), final_loss=round(float(loss.detach()), 4),
                              peak_mem_mib=round(peak, 1))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
