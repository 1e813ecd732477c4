#!/usr/bin/env bash
# Installs optkit's build and test dependencies from Debian 12 packages. Idempotent: packages
# already present are left alone, so running it twice costs one dpkg query.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libsqlite3-dev sqlite3
  doctest-dev libboost-dev libboost-filesystem-dev nlohmann-json3-dev
  libopenblas-dev gfortran libzstd-dev libonig-dev
  coinor-libcbc-dev libbz2-dev zlib1g-dev # plan hetero's ILP solver (CBC), linked statically
  clang clang-format libclang-rt-14-dev
  procps util-linux man-db python3 nodejs
  python3-prometheus-client # tests only: parses serve-deltas' /metrics as Prometheus does
  python3-optuna # tests only: the oracle optkit tune's TPE is checked against
  slurm-wlm munge # tests only: the localhost cluster tune --executor slurm is tested on
  chromium # tests only: renders flow's report.html headless to prove it needs nothing external
)
# --training adds what testdata/models/tools/*.py need to retrain the test models and rewrite
# the logit oracle (PyTorch as a test oracle only; never a dependency of optkit itself).
if [ "${1:-}" = "--training" ]; then
  packages+=(python3-torch python3-regex fortunes wordnet-base debian-reference-en gnu-standards)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
