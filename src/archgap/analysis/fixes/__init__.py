"""The one fix engine that scan and explain share (engine: which fixes remove a JIT failure on
one exact GPU, ranked), and FlashInfer's own code as data (flashinfer_rules), which the engine and
the FlashInfer JIT model both read. The plan that turns fixes into changes on a target
(analysis.fixplan) reads a scan, so it sits above the JIT models and stays outside."""
