"""Building for a set of GPUs: the fewest targets whose device code runs natively on every GPU
(recipe), how each build system spells them (spelling), and the CI gate that checks what was built
against the required GPUs (gate)."""
