"""What the JIT compilers in the stack will do on first use, for the GPUs judged: each compiler's
model (FlashInfer and its own rules, Triton, torch extensions), the findings they share, and the
audit of what earlier runs left in the JIT caches."""
