"""The target's environment as facts: its system (one root prefix, commands with timeouts), GPUs
and driver, CUDA toolkits, the Python environment, the loader's libraries, JIT caches, and a
service's environment instead of the shell's."""
