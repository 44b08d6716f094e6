#!/usr/bin/env bash
# Proves the README's two commands on a fresh Debian 12 machine: builds a minimal Debian 12 root
# with debootstrap (cached), copies the project into it, and runs inside it, as a new user would:
#   bash scripts/quickstart.sh   (install what is missing, build, train on real Fashion-MNIST)
#   bash scripts/test.sh         (install what is missing, build, run every test)
# then builds the Debian package there (scripts/package.sh) and installs it with apt-get into a
# second pristine root, where it trains a shipped config from /usr/share/trainer/configs.
# CUDA is not a Debian package, so the root has none: this is the CPU-only build.
#
#   scripts/fresh_machine_check.sh             # the working tree (tracked + untracked files)
#   scripts/fresh_machine_check.sh --rev REV   # a committed revision, e.g. to show an old setup fail
#   FRESH_CACHE=/var/cache/trainer-fresh ...   # where the pristine root is kept (default below)
#   FRESH_KEEP=1 ...                           # keep the used root for inspection
#
# The mirror is this machine's own: the first deb822 or one-line apt source for Debian 12 found in
# /etc/apt, so no mirror is named in the repository. Needs root (debootstrap, chroot, mounts).
set -euo pipefail
cd "$(dirname "$0")/.."
project_dir=$(pwd)

rev=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rev) rev="${2:?--rev needs a revision}"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "fresh_machine_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh_machine_check: needs root (debootstrap, chroot)" >&2; exit 2; }

say() { printf '[fresh %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
start_s=$SECONDS

if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

# This machine's Debian mirror: deb822 "URIs:" of a stanza whose Suites include bookworm, else a
# one-line "deb URI bookworm main" entry.
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mirror=$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |\n|$)/ && !/security/ {
                 if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { s=substr($0,RSTART,RLENGTH); sub(/URIs:[ \t]*/,"",s); print s; exit } }' "$f")
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb" && $3=="bookworm" {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || { echo "fresh_machine_check: no Debian 12 (bookworm) apt source on this machine" >&2; exit 2; }

cache="${FRESH_CACHE:-/var/cache/trainer-fresh}"
base_tar="$cache/bookworm-minbase.tar"
mkdir -p "$cache"
if [ ! -f "$base_tar" ]; then
  say "debootstrap --variant=minbase bookworm from $mirror (cached at $base_tar)"
  tmp_root=$(mktemp -d "$cache/build.XXXXXX")
  debootstrap --variant=minbase bookworm "$tmp_root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log"; exit 1; }
  tar -C "$tmp_root" -cf "$base_tar.part" . && mv "$base_tar.part" "$base_tar"
  rm -rf "$tmp_root"
fi

root=$(mktemp -d /tmp/trainer-fresh.XXXXXX)
cleanup() {
  for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
  if [ -z "${FRESH_KEEP:-}" ]; then rm -rf --one-file-system "$root"; else say "kept $root"; fi
}
trap cleanup EXIT
say "unpacking a pristine root into $root"
tar -C "$root" -xf "$base_tar"

# The same apt sources as this machine (its mirrors, its snapshot), and name resolution.
rm -f "$root/etc/apt/sources.list"
mkdir -p "$root/etc/apt/sources.list.d"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  case "$f" in *debian*|/etc/apt/sources.list) cp "$f" "$root$f" ;; esac
done
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t sysfs sysfs "$root/sys" 2>/dev/null || true

mkdir -p "$root/src/trainer"
if [ -n "$rev" ]; then
  say "copying revision $rev"
  git archive "$rev" | tar -x -C "$root/src/trainer"
else
  say "copying the working tree ($(git rev-parse --short HEAD) + local changes)"
  git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -x -C "$root/src/trainer"
fi

run_in_root() {  # a login-like shell in the root: no host PATH entries, no CUDA
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive /bin/bash -c "cd /src/trainer && $1"
}

status=0
say "README command 1: bash scripts/quickstart.sh"
t0=$SECONDS
if run_in_root "bash scripts/quickstart.sh" >"$root/quickstart.log" 2>&1; then
  say "quickstart passed in $((SECONDS - t0)) s; last lines:"
  tail -4 "$root/quickstart.log" | sed 's/^/    /'
else
  status=1
  say "quickstart FAILED after $((SECONDS - t0)) s; last lines:"
  tail -25 "$root/quickstart.log" | sed 's/^/    /'
fi

if [ "$status" -eq 0 ]; then
  say "README command 2: bash scripts/test.sh"
  t0=$SECONDS
  if run_in_root "bash scripts/test.sh" >"$root/test.log" 2>&1; then
    say "tests passed in $((SECONDS - t0)) s:"
    grep -E "tests passed|tests failed|Skipped" "$root/test.log" | tail -3 | sed 's/^/    /'
  else
    status=1
    say "tests FAILED after $((SECONDS - t0)) s; last lines:"
    tail -25 "$root/test.log" | sed 's/^/    /'
  fi
fi
# The Debian package (scripts/package.sh, from the CPU-only build/ just tested), installed with
# apt-get into a second pristine root, which must then train a shipped config from
# /usr/share/trainer/configs: the package's declared dependencies are all it gets.
if [ "$status" -eq 0 ]; then
  say "package: BUILD_DIR=build bash scripts/package.sh"
  t0=$SECONDS
  if run_in_root "BUILD_DIR=build bash scripts/package.sh" >"$root/package.log" 2>&1; then
    deb=$(ls "$root"/src/trainer/build/trainer_*_amd64.deb)
    say "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) in $((SECONDS - t0)) s; its dependencies:"
    grep -E "^ (Depends|Recommends|Suggests):" "$root/package.log" | sed 's/^/   /'
    root2=$(mktemp -d /tmp/trainer-fresh-pkg.XXXXXX)
    tar -C "$root2" -xf "$base_tar"
    rm -f "$root2/etc/apt/sources.list"
    cp -a "$root/etc/apt/." "$root2/etc/apt/"
    cp /etc/resolv.conf "$root2/etc/resolv.conf" 2>/dev/null || true
    cp "$deb" "$root2/tmp/"
    mount -t proc proc "$root2/proc"
    install_cmds="apt-get update -qq && apt-get install -y -qq /tmp/$(basename "$deb") >/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }
      echo '\$ apt-get install ./$(basename "$deb")' && tail -1 /tmp/apt.log
      echo '\$ trainer --version' && trainer --version | head -2
      echo '\$ ls /usr/share/trainer/configs | head -3' && ls /usr/share/trainer/configs | head -3
      echo '\$ trainer schema | cmp - /usr/share/trainer/docs/trainer.schema.json && echo same' &&
        trainer schema | cmp - /usr/share/trainer/docs/trainer.schema.json && echo same
      echo '\$ trainer help optimizer.nesterov' && trainer help optimizer.nesterov
      echo '\$ trainer fit /usr/share/trainer/configs/fashion_mnist_cnn.yaml --set train.epochs=1 --out /tmp/run'
      trainer fit /usr/share/trainer/configs/fashion_mnist_cnn.yaml --set train.epochs=1 --out /tmp/run 2>&1 | tail -3
      echo '\$ trainer plot /tmp/run --out /tmp/run.png' && trainer plot /tmp/run --out /tmp/run.png && ls -l /tmp/run.png
      echo '\$ man -w trainer; ls /usr/share/bash-completion/completions/trainer'
      ls /usr/share/man/man1/trainer.1* /usr/share/bash-completion/completions/trainer"
    t0=$SECONDS
    if chroot "$root2" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
         DEBIAN_FRONTEND=noninteractive /bin/bash -c "set -eo pipefail; $install_cmds" >"$root/package_install.log" 2>&1; then
      say "package installed and used in a fresh root in $((SECONDS - t0)) s:"
      sed 's/^/    /' "$root/package_install.log"
    else
      status=1
      say "package install or use FAILED in a fresh root; last lines:"
      tail -25 "$root/package_install.log" | sed 's/^/    /'
    fi
    umount -l "$root2/proc" 2>/dev/null || true
    [ -z "${FRESH_KEEP:-}" ] && rm -rf --one-file-system "$root2"
  else
    status=1
    say "package FAILED after $((SECONDS - t0)) s; last lines:"
    tail -25 "$root/package.log" | sed 's/^/    /'
  fi
fi
say "fresh-machine check $( [ $status -eq 0 ] && echo PASSED || echo FAILED ) in $((SECONDS - start_s)) s"
exit $status
