#!/usr/bin/env python3
"""PyTorch's standard image pipeline, as the anchor for trainer's image folders (issue 28).

  image_loader_peer.py mnist FOLDER [--workers 8,16] [--epochs 3] [--batch 200]
      torchvision ImageFolder (grayscale PNG) + DataLoader (shuffle, pin_memory, persistent_workers)
      feeding the PyTorch MNIST-example network (configs/fashion_mnist_cnn.yaml's) with Adam on the
      GPU: one JSON line per worker count with the first and the steady (median of the rest)
      epoch's seconds.
  image_loader_peer.py resnet FOLDER [--workers 16] [--steps 150] [--batch 256]
      ImageFolder (JPEG) + Resize(256) + RandomResizedCrop(224) + RandomHorizontalFlip +
      ToTensor + Normalize, resnet18 (torchvision) in bf16 autocast + channels_last with SGD:
      images/s of the loader alone and of training fed by it, after 20 warm-up steps.
  image_loader_peer.py make-jpeg DIR [--count 20000] [--classes 10] [--size 256]
      Writes COUNT random-content JPEG files of SIZE x SIZE (quality 90) into DIR/class_k/
      (content does not matter for speed, structure does: smooth noise that JPEG compresses
      like photographs, not white noise).
"""
import argparse, json, os, statistics, sys, time


def mnist(a):
    import torch, torch.nn as nn, torch.nn.functional as F
    from torchvision import datasets, transforms

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.conv1, s.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
            s.drop, s.fc1, s.fc2 = nn.Dropout2d(), nn.Linear(320, 50), nn.Linear(50, 10)

        def forward(s, x):
            x = F.relu(F.max_pool2d(s.conv1(x), 2))
            x = F.relu(F.max_pool2d(s.drop(s.conv2(x)), 2))
            x = F.dropout(F.relu(s.fc1(x.flatten(1))), training=s.training)
            return F.log_softmax(s.fc2(x), dim=1)

    tf = transforms.Compose([transforms.Grayscale(), transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
    ds = datasets.ImageFolder(a.folder, transform=tf)
    for w in [int(x) for x in a.workers.split(",")]:
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=w, pin_memory=True,
                                         persistent_workers=w > 0)
        net = Net().cuda()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        times = []
        for _ in range(a.epochs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for x, y in dl:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                opt.zero_grad(set_to_none=True)
                F.nll_loss(net(x), y).backward()
                opt.step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        print(json.dumps({"peer": "torchvision ImageFolder + DataLoader", "workload": "fashion_mnist_cnn",
                          "images": len(ds), "workers": w, "first_epoch_s": round(times[0], 3),
                          "steady_epoch_s": round(statistics.median(times[1:]), 3)}), flush=True)


def resnet(a):
    import torch, torch.nn as nn, torch.nn.functional as F
    from torchvision import datasets, transforms, models
    torch.backends.cudnn.benchmark = True
    tf = transforms.Compose([transforms.Resize(256), transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    ds = datasets.ImageFolder(a.folder, transform=tf)
    w = int(a.workers.split(",")[0])
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=w, pin_memory=True,
                                     persistent_workers=True, drop_last=True)

    def batches():
        while True:
            for b in dl:
                yield b

    it = batches()
    # the loader alone
    for _ in range(10): next(it)
    t0 = time.perf_counter()
    for _ in range(a.steps // 2): next(it)
    loader_ips = a.steps // 2 * a.batch / (time.perf_counter() - t0)
    net = models.resnet18(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(20):
        x, y = next(it)
        step(x.cuda(non_blocking=True).to(memory_format=torch.channels_last), y.cuda(non_blocking=True))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        x, y = next(it)
        step(x.cuda(non_blocking=True).to(memory_format=torch.channels_last), y.cuda(non_blocking=True))
    torch.cuda.synchronize()
    fed = a.steps * a.batch / (time.perf_counter() - t0)
    # the same model on one synthetic batch already on the GPU
    x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device="cuda")
    for _ in range(10): step(x, y)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50): step(x, y)
    torch.cuda.synchronize()
    synthetic = 50 * a.batch / (time.perf_counter() - t0)
    print(json.dumps({"peer": "torchvision ImageFolder + DataLoader + resnet18 bf16", "images": len(ds), "workers": w,
                      "loader_images_s": round(loader_ips), "fit_images_s": round(fed),
                      "synthetic_images_s": round(synthetic)}), flush=True)


def make_jpeg(a):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    per = a.count // a.classes
    for c in range(a.classes):
        d = os.path.join(a.folder, f"class_{c:02d}")
        os.makedirs(d, exist_ok=True)
        for i in range(per):
            small = rng.integers(0, 256, (a.size // 16, a.size // 16, 3), dtype=np.uint8)
            img = Image.fromarray(small).resize((a.size, a.size), Image.BILINEAR)
            img.save(os.path.join(d, f"{i:05d}.jpg"), quality=90)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["mnist", "resnet", "make-jpeg"])
    ap.add_argument("folder")
    ap.add_argument("--workers", default="8,16")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--size", type=int, default=256)
    a = ap.parse_args()
    {"mnist": mnist, "resnet": resnet, "make-jpeg": make_jpeg}[a.what](a)
