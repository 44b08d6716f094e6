#!/usr/bin/env bash
# Issue 28's speed tables on a GPU machine, in one run (PyTorch beside, on the same GPU):
#   Fashion-MNIST as 70,000 PNG files: trainer fit from the folders (the first epoch with the
#   decode, the steady epoch) against the same config on the IDX files, and torchvision
#   ImageFolder + DataLoader with 8 and 16 workers;
#   20,000 JPEG files of 256x256 (1,000 classes): resnet18_imagenet (shorter side 256, centre crop
#   256, random_resized_crop 224, flip, bf16) fit's images/s against trainer bench's, and
#   torchvision's pipeline with the same model in bf16 + channels_last; the same fit streamed
#   (cache: none, and a 1 GiB cache), with its peak host memory.
#   TRAINER="/tmp/bundle/run trainer" PY=/opt/torch/.venv/bin/python DATA=.bundle/data/fashion-mnist \
#     bash scripts/image_speed.sh            (PART=jpeg: the JPEG part only)
set -uo pipefail
cd "$(dirname "$0")/.."
T=${TRAINER:-build/trainer}
PY=${PY:-python3}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
W=${WORK:-/tmp/image_speed}
mkdir -p "$W"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
epoch_times() { grep -o 'epoch [0-9]*/[0-9]* .*time=[0-9.]*s' | sed 's/.*epoch \([0-9]*\)\/.*time=\([0-9.]*\)s/epoch \1: \2 s/'; }

if [ "${PART:-all}" != jpeg ]; then  # PART=jpeg: the JPEG tables only
echo "== Fashion-MNIST PNG folders"
t0=$(date +%s.%N); $PY scripts/make_image_folder.py --source "$DATA" --out "$W/fm" >/dev/null; t1=$(date +%s.%N)
echo "wrote $(find "$W/fm" -name '*.png' | wc -l) PNG files in $(awk "BEGIN{print $t1 - $t0}") s"
for i in 1 2; do
  echo "-- trainer fit, folders (run $i)"
  /usr/bin/time -f "wall %e s, peak RSS %M KB" $T fit configs/fashion_mnist_folder.yaml --device gpu:0 --epochs 4 --no-out \
    --set data.train.path="$W/fm/train" --set data.validation.path="$W/fm/test" 2>&1 | grep -E "decoded|epoch [0-9]|wall" | sed 's/^\[[^]]*\] //'
  echo "-- trainer fit, IDX (run $i)"
  /usr/bin/time -f "wall %e s, peak RSS %M KB" $T fit configs/fashion_mnist_cnn.yaml --device gpu:0 --epochs 4 --no-out \
    --set data.train.images="$DATA/train-images-idx3-ubyte.gz" --set data.train.labels="$DATA/train-labels-idx1-ubyte.gz" \
    --set data.validation.images="$DATA/t10k-images-idx3-ubyte.gz" --set data.validation.labels="$DATA/t10k-labels-idx1-ubyte.gz" \
    2>&1 | grep -E "epoch [0-9]|wall" | sed 's/^\[[^]]*\] //'
done
echo "-- torchvision ImageFolder + DataLoader"
$PY scripts/image_loader_peer.py mnist "$W/fm/train" --workers 8,16 --epochs 3
fi

echo "== 20,000 JPEG files of 256x256"
t0=$(date +%s.%N)
$PY scripts/image_loader_peer.py make-jpeg "$W/jpg/train" --count 20000 --classes 1000
$PY scripts/image_loader_peer.py make-jpeg "$W/jpg/val" --count 2000 --classes 1000
t1=$(date +%s.%N); echo "wrote the JPEG files in $(awk "BEGIN{print $t1 - $t0}") s"
echo "-- trainer bench resnet18_imagenet bf16"
$T bench configs/resnet18_imagenet.yaml --device gpu:0 2>&1 | grep -vi "info" | tail -4
echo "-- trainer fit resnet18_imagenet (decode, then 3 epochs)"
/usr/bin/time -f "wall %e s, peak RSS %M KB" $T fit configs/resnet18_imagenet.yaml --device gpu:0 --epochs 3 --no-out \
  --set data.train.path="$W/jpg/train" --set data.validation.path="$W/jpg/val" 2>&1 | grep -E "decoded|epoch [0-9]|wall|error" | sed 's/^\[[^]]*\] //'
echo "-- trainer fit resnet18_imagenet streamed: cache none (loader_threads 8, 15), then cache_mb 1024"
for t in 8 15; do
  /usr/bin/time -f "wall %e s, peak RSS %M KB" $T fit configs/resnet18_imagenet.yaml --device gpu:0 --epochs 2 --no-out \
    --set data.train.path="$W/jpg/train" --set data.validation.path="$W/jpg/val" --set data.loader_threads=$t \
    --set data.train.cache=none --set data.validation.cache=none 2>&1 | grep -E "streaming|epoch [0-9]|wall|error" | sed 's/^\[[^]]*\] //'
done
/usr/bin/time -f "wall %e s, peak RSS %M KB" $T fit configs/resnet18_imagenet.yaml --device gpu:0 --epochs 3 --no-out \
  --set data.train.path="$W/jpg/train" --set data.validation.path="$W/jpg/val" --set data.loader_threads=15 \
  --set data.train.cache_mb=1024 --set data.validation.cache=none 2>&1 | grep -E "streaming|epoch [0-9]|wall|error" | sed 's/^\[[^]]*\] //'
echo "-- torchvision resnet18 bf16 (16 workers)"
$PY scripts/image_loader_peer.py resnet "$W/jpg/train" --workers 16 --batch 256 --steps 120
