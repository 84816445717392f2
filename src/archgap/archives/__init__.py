"""Archives read where archgap runs, never on a target: wheels (``wheel``), their members from
compressed bytes in threads (``zipmembers``) or as they stream by (``streamread``); conda
packages and image layers hand their members to the same reader. The device code in each member
is read by the probe's binary reader, so an archive is judged exactly as an installed file."""
