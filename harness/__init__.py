"""topp-gate: a predeclared numerical gate for vLLM's split top-p Triton kernel."""

__version__ = "0.1.0"
