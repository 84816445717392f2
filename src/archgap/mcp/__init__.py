"""archgap as Model Context Protocol tools for an assistant (``archgap mcp``; the ``mcp`` extra).

``schema`` derives each tool's input from its api function, ``tools`` says which function each
tool calls and how its result reads, ``server`` serves them over stdio with the official SDK.
"""
