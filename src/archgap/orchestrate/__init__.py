"""The orchestrator behind ``archgap.api``, one module per command (``fix`` is still in
``archgap.api``) and what the commands share (``shared``: probing, GPU names, judging).
``archgap.api`` re-exports every public name: import from there."""
