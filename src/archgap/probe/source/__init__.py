"""Python source read without importing it (part of the probe: Python 3.8 standard library only).

``files`` finds ``.py`` files and the candidates a bytes search says can match, and reads them;
``sourcefile`` holds one file's lines and parses the smallest AST piece around a line; ``finder``
walks those pieces for the writes and reads of a name; ``flow`` follows calls for the environment
variables that feed a function and the exceptions it raises. The sections built on them:
``trace`` (every place a name occurs as code), ``gates`` (code that detects or gates GPU
architectures) and ``sites`` (the raising statements a crash log points at).
"""
