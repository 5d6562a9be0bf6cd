# Sourced by the scripts/device_*.sh scripts (never run alone): what every call on the lent
# GPU machine (no network) does first.
#   - OUT must be set (by the device tool); KEY is the signing key carried in .carry/
#     (default: evidence key 4, public half evidence/keys/topp-gate-evidence-4.pub);
#   - the working tree carries no usable .git: the caller names the commit it was copied
#     from (TOPP_GATE_SOURCE_COMMIT, TOPP_GATE_SOURCE_CLEAN), which every receipt records as a
#     claim, and GIT_DIR points nowhere so a stale .git in the copy is never read;
#   - the carried wheels (.whl/) are installed once into /tmp/site, under a lock, so scripts
#     started side by side share one install;
#   - PYTHONPATH, unbuffered output and one Triton cache for every run.
OUT=${OUT:?set by the device tool}
KEY=${KEY:-.carry/topp-gate-evidence-4.key}
export TOPP_GATE_SOURCE_COMMIT=${TOPP_GATE_SOURCE_COMMIT:-} TOPP_GATE_SOURCE_CLEAN=${TOPP_GATE_SOURCE_CLEAN:-}
export GIT_DIR=/nonexistent-topp-gate-git
flock /tmp/topp-gate-site.lock sh -c '[ -f /tmp/site/.installed ] || {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }' || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
# the sandbox every kernel child runs in: the image has no bubblewrap, so the carried .deb
# (apt-get download bubblewrap) is unpacked here for every script (a call of 2026-12-05 that
# left this to the caller's command forgot it, and each run rightly refused to start)
if ! command -v bwrap > /dev/null && [ -f .carry/bubblewrap.deb ]; then
  mkdir -p /tmp/bw && dpkg -x .carry/bubblewrap.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
chmod 600 "$KEY" || exit 1  # run refuses a key others may read
# pr and mutate reuse a verified base side only with the key's public half beside it
# (PREFIX.pub); the calls of 2026-12-05 carried none, so their harmful runs ran the base again
[ -f "${KEY%.key}.pub" ] || python3 - "$KEY" <<'PY' || exit 1
import sys
from pathlib import Path
from harness.capture.signing import load_private_key, public_pem
key = Path(sys.argv[1])
key.with_suffix(".pub").write_bytes(public_pem(load_private_key(key).public_key()))
PY

# device_tar NAME DIR: DIR's files as $OUT/NAME.tar.xz.part-NN (15 MiB parts), ordered by
# their path inside a bundle so the identical captured inputs of several bundles sit side by
# side and xz stores them once; the archive's sha256 goes to stdout. XZ_THREADS (default 1):
# more threads compress 192 MiB blocks apart, faster on a 45-bundle run's 700 MB, each block
# storing the shared inputs once more.
device_tar() {
  (cd "$(dirname "$2")" && find "$(basename "$2")" -type f | LC_ALL=C sort -t/ -k3 -k2 \
    | tar -cf - --no-recursion -T -) | xz -T"${XZ_THREADS:-1}" -9 > "/tmp/$1.tar.xz"
  sha256sum "/tmp/$1.tar.xz"
  split -b 15M -d "/tmp/$1.tar.xz" "$OUT/$1.tar.xz.part-"
}
