#!/usr/bin/env python3
"""Derive a small multi-label table from scikit-learn's wine data (configs/wine_multilabel.yaml).

Reads /usr/lib/python3/dist-packages/sklearn/datasets/data/wine_data.csv in place (Debian's
python3-sklearn; its first line is "178,13,class_0,class_1,class_2", then 13 measurements and the
cultivar per row) and writes one CSV with a header: the 10 measurements that stay features, and
a `labels` column holding a "|"-separated list of the properties each wine has:

    alcohol_high    alcohol above the median of the 178 wines
    color_high      color_intensity above its median
    proline_high    proline above its median

Those three columns are left out of the features, so the labels must be inferred from the other
measurements (they correlate: the cultivars differ in all of them). A wine may have none, one, two
or three labels (an empty cell: none). The rows are shuffled with a fixed seed (the file is sorted
by cultivar), so data.validation_split's tail is a fair sample. Standard library only.

    python3 scripts/make_multilabel_csv.py                      # writes data/wine_multilabel.csv
    python3 scripts/make_multilabel_csv.py --out /tmp/wine.csv
"""
import argparse
import csv
import os
import random
import statistics

WINE = "/usr/lib/python3/dist-packages/sklearn/datasets/data/wine_data.csv"
NAMES = ["alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols", "flavanoids",
         "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue", "od280_od315", "proline"]
LABELS = {"alcohol_high": "alcohol", "color_high": "color_intensity", "proline_high": "proline"}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wine", default=WINE, help="scikit-learn's wine_data.csv")
    p.add_argument("--out", default="data/wine_multilabel.csv")
    p.add_argument("--seed", type=int, default=29)
    a = p.parse_args()
    with open(a.wine, newline="") as f:
        rows = list(csv.reader(f))[1:]  # the first line is counts and class names
    table = [dict(zip(NAMES, map(float, r[:13]))) for r in rows]
    medians = {c: statistics.median(t[c] for t in table) for c in LABELS.values()}
    random.Random(a.seed).shuffle(table)
    features = [c for c in NAMES if c not in LABELS.values()]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(features + ["labels"])
        for t in table:
            labels = [name for name, col in LABELS.items() if t[col] > medians[col]]
            w.writerow([repr(t[c]) for c in features] + ["|".join(labels)])
    print(f"wrote {a.out}: {len(table)} rows, {len(features)} features, labels {', '.join(LABELS)}")


if __name__ == "__main__":
    main()
