#!/usr/bin/env python3
"""trainer against a PyTorch twin and a scikit-learn floor on the tabular data sets Debian ships.

  tabular_parity.py prepare DIR     (needs /usr/bin/python3 with python3-sklearn)
      Splits iris (classification), breast_cancer (binary), diabetes (regression) and a
      multi-label table derived from wine (three 0/1 labels: class 0, alcohol above the median,
      color intensity above the median) into stratified 80/20 train/validation CSV files (the
      features standardized with the training part's statistics), writes a trainer config for
      each (dense 32, relu, dense K; adam 0.01, batch 16, 60 epochs) and prints scikit-learn's
      LogisticRegression / Ridge on the same split (the floor). Both sides below train on these
      exact files, so split and preprocessing are the same.
  tabular_parity.py run DIR [--trainer build/trainer] [--seeds 5]   (needs numpy and torch)
      Trains each config with trainer and the same network, optimizer, batches and epochs in
      PyTorch, over several seeds, and prints the final validation metric of each (mean and
      spread): accuracy, F1 (binary: the positive class'; multi-label: micro), MSE.
"""
import argparse, csv, json, os, shlex, subprocess, sys

TASKS = {
    # name: (loss, outputs, metric)
    "iris": ("cross_entropy", 3, "accuracy"),
    "breast_cancer": ("binary_cross_entropy", 1, "f1"),
    "diabetes": ("mse", 1, "mse"),
    "wine_multilabel": ("binary_cross_entropy", 3, "f1"),
}
EPOCHS, BATCH, LR, HIDDEN = 60, 16, 0.01, 32


def write_csv(path, X, Y):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for x, y in zip(X, Y):
            y = list(y) if hasattr(y, "__len__") else [y]
            w.writerow([f"{v:.9g}" for v in x] + [f"{v:.9g}" if isinstance(v, float) else int(v) for v in y])


def prepare(d):
    import numpy as np
    from sklearn import datasets
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import accuracy_score, f1_score, mean_squared_error
    from sklearn.model_selection import train_test_split

    os.makedirs(d, exist_ok=True)
    wine = datasets.load_wine()
    alcohol, color = wine.data[:, 0], wine.data[:, 9]
    multi = np.stack([wine.target == 0, alcohol > np.median(alcohol), color > np.median(color)], 1).astype(int)
    sets = {
        "iris": (datasets.load_iris().data, datasets.load_iris().target),
        "breast_cancer": (datasets.load_breast_cancer().data, datasets.load_breast_cancer().target),
        "diabetes": (datasets.load_diabetes(scaled=False).data, datasets.load_diabetes().target),
        "wine_multilabel": (np.delete(wine.data, [0, 9], axis=1), multi),
    }
    floor = {}
    for name, (X, y) in sets.items():
        loss, K, metric = TASKS[name]
        strat = y if y.ndim == 1 and metric != "mse" else None
        Xtr, Xva, ytr, yva = train_test_split(X, y, test_size=0.2, random_state=0, stratify=strat)
        mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-12
        Xtr, Xva = (Xtr - mu) / sd, (Xva - mu) / sd
        if metric == "mse":  # targets standardized too, so the loss is on a unit scale
            tm, ts = ytr.mean(), ytr.std()
            ytr, yva = (ytr - tm) / ts, (yva - tm) / ts
            ytr, yva = ytr.astype(float), yva.astype(float)
        write_csv(f"{d}/{name}_train.csv", Xtr, ytr)
        write_csv(f"{d}/{name}_val.csv", Xva, yva)
        ncols = X.shape[1] + (K if y.ndim == 2 else 1)
        label_cols = list(range(X.shape[1], ncols)) if y.ndim == 2 else -1
        cfg = {
            "model": {"input_shape": [X.shape[1]],
                      "layers": [{"type": "dense", "units": HIDDEN}, {"type": "relu"}, {"type": "dense", "units": K}]},
            "loss": loss,
            "optimizer": {"type": "adam", "lr": LR},
            "data": {"train": {"format": "csv", "path": f"{name}_train.csv", "label_column": label_cols},
                     "validation": {"format": "csv", "path": f"{name}_val.csv", "label_column": label_cols},
                     "batch_size": BATCH, "shuffle": True},
            "train": {"epochs": EPOCHS},
        }
        if loss == "cross_entropy":
            cfg["data"]["num_classes"] = K
        cfg["metrics"] = {"accuracy": ["accuracy"], "f1": ["accuracy", "f1", "auc"], "mse": ["mse", "r2"]}[metric]
        with open(f"{d}/{name}.json", "w") as f:
            json.dump(cfg, f)
        if metric == "mse":
            p = Ridge(alpha=1.0).fit(Xtr, ytr).predict(Xva)
            floor[name] = ("Ridge", mean_squared_error(yva, p))
        elif y.ndim == 2:
            p = np.stack([LogisticRegression(max_iter=1000).fit(Xtr, ytr[:, k]).predict(Xva) for k in range(K)], 1)
            floor[name] = ("LogisticRegression per label", f1_score(yva, p, average="micro"))
        else:
            p = LogisticRegression(max_iter=1000).fit(Xtr, ytr).predict(Xva)
            v = accuracy_score(yva, p) if metric == "accuracy" else f1_score(yva, p)
            floor[name] = ("LogisticRegression", v)
    with open(f"{d}/floor.json", "w") as f:
        json.dump(floor, f)
    for name, (model, v) in floor.items():
        print(f"{name:16s} scikit-learn {model}: {TASKS[name][2]} {v:.4f}")


def load(path, K):
    import numpy as np
    a = np.loadtxt(path, delimiter=",", ndmin=2)
    return a[:, :-K].astype("float32"), a[:, -K:]


def torch_run(d, name, seed):
    import numpy as np
    import torch
    import torch.nn as nn
    loss_name, K, metric = TASKS[name]
    cols = K if name == "wine_multilabel" else 1
    Xtr, ytr = load(f"{d}/{name}_train.csv", cols)
    Xva, yva = load(f"{d}/{name}_val.csv", cols)
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(Xtr.shape[1], HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, K))
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    if loss_name == "cross_entropy":
        crit, tr_t = nn.CrossEntropyLoss(), torch.tensor(ytr[:, 0], dtype=torch.long)
    elif loss_name == "mse":
        crit, tr_t = nn.MSELoss(), torch.tensor(ytr, dtype=torch.float32)
    else:
        crit, tr_t = nn.BCEWithLogitsLoss(), torch.tensor(ytr, dtype=torch.float32)
    X = torch.tensor(Xtr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(EPOCHS):
        perm = torch.randperm(len(X), generator=g)
        for i in range(0, len(X), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            crit(net(X[idx]), tr_t[idx]).backward()
            opt.step()
    with torch.no_grad():
        out = net(torch.tensor(Xva)).numpy()
    return score(metric, loss_name, out, yva)


def score(metric, loss_name, out, y):
    import numpy as np
    if metric == "mse":
        return float(((out - y) ** 2).mean())
    if loss_name == "cross_entropy":
        return float((out.argmax(1) == y[:, 0]).mean())
    pred, y = out > 0, y > 0.5
    tp, fp, fn = (pred & y).sum(), (pred & ~y).sum(), (~pred & y).sum()
    return float(2 * tp / max(2 * tp + fp + fn, 1))


def trainer_run(d, name, seed, trainer):
    loss_name, K, metric = TASKS[name]
    out = subprocess.run(shlex.split(trainer) + ["fit", f"{d}/{name}.yaml", "--set", f"train.seed={seed}", "--log-format", "json"],
                         capture_output=True, text=True, cwd=d)
    if out.returncode != 0:
        sys.exit(f"trainer fit {name} failed:\n{out.stderr[-3000:]}")
    last = None
    for line in out.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("event") == "epoch":
            last = j
    key = "val_" + metric
    return float(last[key])


def run(d, trainer, seeds):
    import numpy as np
    floor = json.load(open(f"{d}/floor.json"))
    print(f"| data set | task metric | trainer (mean ± sd, {seeds} seeds) | PyTorch twin | scikit-learn floor |")
    print("|---|---|---|---|---|")
    for name in TASKS:
        cfg = json.load(open(f"{d}/{name}.json"))
        with open(f"{d}/{name}.yaml", "w") as f:  # YAML is a superset of JSON
            json.dump(cfg, f)
        t = [trainer_run(d, name, s, trainer) for s in range(seeds)]
        p = [torch_run(d, name, s) for s in range(seeds)]
        metric = TASKS[name][2]
        print(f"| {name} | val {metric} | {np.mean(t):.4f} ± {np.std(t):.4f} | {np.mean(p):.4f} ± {np.std(p):.4f} | "
              f"{floor[name][1]:.4f} ({floor[name][0]}) |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["prepare", "run"])
    ap.add_argument("dir")
    ap.add_argument("--trainer", default=os.path.abspath("build/trainer"), help="the trainer command (may be a wrapper with arguments)")
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    prepare(a.dir) if a.what == "prepare" else run(os.path.abspath(a.dir), a.trainer, a.seeds)
