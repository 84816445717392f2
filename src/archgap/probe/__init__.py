"""The probe: collects facts on the target machine.

Python 3.8 standard-library code that imports nothing outside this package, so it can be sent
over ssh, srun, ``docker exec -i`` or ``kubectl exec -i`` to a host with nothing installed and run
under the inspected environment's own interpreter. It reads files and runs tools with timeouts; it
never imports the packages it inspects and never raises: what it cannot read becomes a value with
a reason.
"""
