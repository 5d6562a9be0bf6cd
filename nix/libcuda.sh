# Shell functions placed before the text of the `gate` and `probe` wrappers (nix/apps.nix),
# which call them before they start topp-gate: make the host's NVIDIA driver library,
# libcuda.so.1, visible to the Nix-built torch and Triton, also on a machine that is not
# NixOS.
#
# Nix-built programs do not search the host's /usr/lib, and the driver cannot come from
# Nix (it must match the kernel module). NixOS puts it in /run/opengl-driver/lib; other
# distributions put it in their own library directory. We look in, in order:
#   1. $TOPP_GATE_LIBCUDA_DIR (set it to override everything below)
#   2. /run/opengl-driver/lib (NixOS, or a host prepared as in docs/nix.md)
#   3. each directory of $LD_LIBRARY_PATH
#   4. the host's loader cache (`ldconfig -p`)
#   5. the usual driver directories of Debian/Ubuntu, Fedora/RHEL, containers and WSL
# and expose only the driver's own libraries (libcuda*, libnvidia-*) through a private
# directory of links, never the host's whole library directory (which would mix the
# host's libstdc++ and friends into the Nix closure).
#
# Settings (all optional): TOPP_GATE_LIBCUDA_DIR, TOPP_GATE_LDCONFIG (the ldconfig
# programs to try, space-separated; default: the host's /sbin/ldconfig /usr/sbin/ldconfig),
# TOPP_GATE_LIBCUDA_SYSTEM_DIRS (colon-separated list replacing steps 2 and 5),
# TOPP_GATE_CACHE (where the private link directory lives).

topp_gate_libcuda_system_dirs() {
  printf '%s\n' "${TOPP_GATE_LIBCUDA_SYSTEM_DIRS:-/run/opengl-driver/lib:/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/lib:/usr/local/nvidia/lib64:/usr/lib/wsl/lib}" | tr ':' '\n'
}

topp_gate_libcuda_candidates() {
  local ldconfig dir
  if [ -n "${TOPP_GATE_LIBCUDA_DIR:-}" ]; then
    printf '%s\n' "$TOPP_GATE_LIBCUDA_DIR"
    return 0
  fi
  topp_gate_libcuda_system_dirs | head -n 1
  printf '%s\n' "${LD_LIBRARY_PATH:-}" | tr ':' '\n'
  for ldconfig in ${TOPP_GATE_LDCONFIG:-/sbin/ldconfig /usr/sbin/ldconfig}; do
    if [ -x "$ldconfig" ]; then
      # lines look like: "	libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
      "$ldconfig" -p 2>/dev/null | sed -n 's|^[[:space:]]*libcuda\.so\.1 (.*x86-64.*) => \(.*\)/libcuda\.so\.1$|\1|p'
      break
    fi
  done
  topp_gate_libcuda_system_dirs | tail -n +2
  if [ -z "${TOPP_GATE_LIBCUDA_SYSTEM_DIRS:-}" ]; then
    for dir in /usr/lib/nvidia*; do
      if [ -d "$dir" ]; then printf '%s\n' "$dir"; fi
    done
  fi
}

topp_gate_libcuda_missing() {
  cat >&2 <<EOF
topp-gate: cannot find the NVIDIA driver library libcuda.so.1.
  Looked in: ${1}
  To fix, do one of these:
  - install the NVIDIA driver (nvidia-smi must work), then run again;
  - point at the directory that holds libcuda.so.1:
      TOPP_GATE_LIBCUDA_DIR=/path/to/dir nix run .#gate -- ...
  - prepare the NixOS driver location once (any distribution), linking the driver's own
    libraries only (the whole library folder would put the host's libstdc++ before Nix's):
      d=/usr/lib/x86_64-linux-gnu   # the folder holding libcuda.so.1
      sudo mkdir -p /run/opengl-driver/lib
      sudo ln -sf "\$d"/libcuda.so* "\$d"/libnvidia-*.so* /run/opengl-driver/lib/
  - or run the gate without a GPU, in Triton's interpreter (slow; no CUDA closure):
      nix run .#gate-interpreter
EOF
}

# Sets LD_LIBRARY_PATH, TRITON_LIBCUDA_PATH and TOPP_GATE_LIBCUDA_FOUND; returns 1 (after
# saying what to do) when no libcuda.so.1 is found.
topp_gate_use_libcuda() {
  local dir found="" looked="" links f
  while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    looked="${looked:+$looked, }$dir"
    if [ -e "$dir/libcuda.so.1" ]; then
      found="$dir"
      break
    fi
  done < <(topp_gate_libcuda_candidates)
  if [ -z "$found" ]; then
    topp_gate_libcuda_missing "$looked"
    return 1
  fi
  links="${TOPP_GATE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/topp-gate}/libcuda"
  mkdir -p "$links"
  rm -f "$links"/lib*
  for f in "$found"/libcuda.so* "$found"/libnvidia-*.so*; do
    if [ -e "$f" ]; then ln -sfn "$f" "$links/"; fi
  done
  # the linker Triton runs for its launcher wants the unversioned name
  if [ ! -e "$links/libcuda.so" ]; then ln -sfn "$found/libcuda.so.1" "$links/libcuda.so"; fi
  export LD_LIBRARY_PATH="$links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TRITON_LIBCUDA_PATH="$links"
  export TOPP_GATE_LIBCUDA_FOUND="$found"
  # Triton reads TRITON_LIBCUDA_PATH at every nixpkgs revision: nix/triton-libcuda.nix
  # makes it do so where nixpkgs hard-codes /run/opengl-driver/lib instead.
}

# True when the arguments ask for no GPU (Triton's interpreter) or only for help. Used
# by the probe wrapper only (the gate wrapper reads its arguments itself), so in the gate
# script it is never called: ShellCheck 0.9 reports that as SC2317, 0.11 as
# SC2329 (nixpkgs' writeShellApplication fails on either; tests/unit/test_flake.py runs
# every ShellCheck it finds).
# shellcheck disable=SC2317,SC2329
topp_gate_needs_no_gpu() {
  local prev="" arg
  for arg in "$@"; do
    case "$arg" in
      -h | --help | --backend=interpreter) return 0 ;;
      interpreter) if [ "$prev" = "--backend" ]; then return 0; fi ;;
    esac
    prev="$arg"
  done
  return 1
}
