# The project's one pin file, read by Python (importlib.resources) and here, so the
# wheel hashes have a single source of truth.
let
  pins = builtins.fromJSON (builtins.readFile ../harness/data/pins.json);
in
pins
// {
  # The fetchPypi arguments for one side ("stock" or "patched"): vLLM's
  # cp38-abi3-manylinux_2_28_x86_64 wheel, with the sha256 from the pin file.
  wheelArgs =
    side:
    let
      s = pins.sides.${side};
      args = {
        pname = "vllm";
        inherit (s) version;
        format = "wheel";
        dist = "cp38";
        python = "cp38";
        abi = "abi3";
        platform = "manylinux_2_28_x86_64";
        sha256 = s.wheel_sha256;
      };
      fileName = "${args.pname}-${args.version}-${args.python}-${args.abi}-${args.platform}.whl";
    in
    if fileName == s.wheel then
      args
    else
      throw "harness/data/pins.json: sides.${side}.wheel is ${s.wheel}, but the flake fetches ${fileName}";
}
