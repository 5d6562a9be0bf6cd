"""One module per CLI verb. Each defines ``register(subparsers)`` and ``run(args) -> int``.

Modules are imported lazily by :mod:`harness.cli`, so ``topp-gate verify`` never imports
the kernel side (torch, triton, vLLM).
"""
