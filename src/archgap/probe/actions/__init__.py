"""What the probe does on the target beyond reading: load device code through the CUDA driver
(``verify``, each GPU in a ``cuda_child``) and make or take back fixes (``fixer``)."""
