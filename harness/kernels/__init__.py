"""Kernel side: run pinned vLLM kernels in child processes (``runner``) and the child itself
(``child``). Importing this package loads neither torch nor vLLM."""
