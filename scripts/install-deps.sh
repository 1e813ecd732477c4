#!/usr/bin/env bash
# Installs optkit's dependencies from Debian 12 packages: what the build and the binary need, and
# with --tests what the test suite needs too. Idempotent: packages already present are left alone,
# so running it twice costs one dpkg query.
set -euo pipefail

# What building and running optkit needs (README command (a)).
packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libsqlite3-dev sqlite3
  libboost-dev libboost-filesystem-dev nlohmann-json3-dev
  libopenblas-dev libgfortran-12-dev libzstd-dev libonig-dev # libgfortran.a: OpenBLAS's LAPACK half
  coinor-libcbc-dev libbz2-dev zlib1g-dev # plan hetero's ILP solver (CBC), linked statically
)
# --tests adds what scripts/test-all.sh needs beyond the build (README command (b)); --training
# adds what testdata/models/tools/*.py need to retrain the test models and rewrite the logit oracle
# (PyTorch as a test oracle only; never a dependency of optkit itself).
for option in "$@"; do
  case $option in
    --tests)
      packages+=(
        doctest-dev # the unit tests
        man-db # the packaging test renders the installed man page
        clang clang-format libclang-rt-14-dev # the format check, the ASan+UBSan build, libFuzzer
        procps util-linux python3 # pgrep, taskset and the CLI tests' JSON checks
        nodejs # the npm tokenizer, chat-template and openai client conformance tests
        python3-prometheus-client # parses serve-deltas' /metrics as Prometheus does
        python3-optuna # the oracle optkit tune's TPE is checked against
        slurm-wlm munge # the localhost cluster tune --executor slurm is tested on
        chromium # renders flow's report.html headless to prove it needs nothing external
      ) ;;
    --training)
      packages+=(python3-torch python3-regex fortunes wordnet-base debian-reference-en gnu-standards) ;;
    *)
      echo "install-deps: unknown option '$option' (use --tests and/or --training)" >&2
      exit 2 ;;
  esac
done

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
