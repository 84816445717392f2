"""Verdicts: which device code runs on which GPU (compat: the compatibility rules, once), can a
library, and a package, run on a GPU (its SASS and PTX against the GPU and the driver), and would
it load there at all (the load model: needed libraries, the driver, the build a package picks; the
platform: a library built for another CPU than the GPU's host)."""
