# The frozen manifests (`*.json` and their `.sha256`), copied from evidence/manifests/ into
# the store: the one source of truth, so the `gate` and `verify` wrappers read the same
# bytes from any directory. tests/unit/test_nix_wrappers.py checks the copy is exact.
{ src }:
builtins.path {
  name = "topp-gate-manifests";
  path = src + "/evidence/manifests";
  filter =
    path: type: type == "regular" && builtins.match ".*\\.json(\\.sha256)?" (baseNameOf path) != null;
}
