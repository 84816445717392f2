"""How binaries are read: ELF images, static archives, fatbin containers and their entries, and
cubins hidden in data sections, from headers through mmap, within a work budget."""
