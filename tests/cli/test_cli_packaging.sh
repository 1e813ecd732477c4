# One self-contained binary, and an install that finds its own data and man pages.
. "$(dirname "$0")/lib.sh"

libs=$(ldd "$OPTKIT" | awk '{print $1}')
# A sanitizer build links the sanitizer runtimes; the rest of the check still applies.
libs=$(grep -vE '^lib(asan|ubsan)\.so' <<<"$libs")
for forbidden in yaml-cpp spdlog fmt sqlite boost cli11 openblas gfortran cudart cublas; do
  grep -qi "$forbidden" <<<"$libs" && fail "$OPTKIT links $forbidden dynamically: $libs"
done
# libonig.so.5: Oniguruma, the regex engine of Hugging Face tokenizers, which Debian 12 ships only
# as a shared library (package libonig5); it is the one third-party library linked dynamically.
for lib in $libs; do
  case "$lib" in
  linux-vdso.so.1 | /lib64/ld-linux-x86-64.so.2 | libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1) ;;
  libonig.so.5) ;;
  *) fail "unexpected shared library $lib" ;;
  esac
done

prefix="$SCRATCH/prefix"
cmake --install "$OPTKIT_BUILD_DIR" --prefix "$prefix" >/dev/null || fail "cmake --install failed"
[ -x "$prefix/bin/optkit" ] || fail "no installed binary"
[ -f "$prefix/share/man/man1/optkit.1" ] || fail "no installed man page"
[ -d "$prefix/share/optkit/recipes" ] && [ -d "$prefix/share/optkit/profiles" ] || fail "no installed data"

# Installed: data comes from <prefix>/share/optkit, even with the source tree out of reach.
OPTKIT="$prefix/bin/optkit" run doctor --format json
expect_rc 0
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
data = [c for c in d["checks"] if c["check"] == "data"][0]
assert data["status"] == "ok" and "/share/optkit" in data["detail"] and "(install;" in data["detail"], data' \
  "$OUT" "$prefix" || fail "installed binary did not find its data: $OUT"

# OPTKIT_DATA_DIR overrides, and a wrong one is an error that says so.
OPTKIT_DATA_DIR="$SCRATCH/nowhere" OPTKIT="$prefix/bin/optkit" run doctor
expect_rc 1
expect_out_has "set OPTKIT_DATA_DIR"

man -l "$prefix/share/man/man1/optkit.1" 2>/dev/null | grep -q "EXIT STATUS" || fail "man page does not render"
# Every installed page renders without a troff warning (a line opening with ' or . is a request
# and vanishes from the page).
for page in "$prefix"/share/man/man1/*.1; do
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$(basename "$page"): $warnings"
done
echo "ok"
