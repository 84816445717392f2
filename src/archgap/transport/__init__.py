"""Transports: run the probe where the GPUs are (ssh, a container, a pod, any command prefix).

A transport is a command prefix connected by stdin/stdout that starts the target's Python
(``target.py``); ``run.py`` sends the probe package over it (``bootstrap.py``) and reads the facts
back, or a ``TransportFailure`` value saying why not; ``slurm.py`` runs it once per node.
Locally the probe runs in-process, remotely the same ``archgap.probe.collect.collect`` runs under
the target's interpreter. Commands get their options from ``archgap.cli.options.TARGET``.

Import from the submodules: this package file stays empty so that the CLI starts fast.
"""
