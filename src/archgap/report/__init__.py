"""Rendering: JSON documents with a versioned schema (text is rendered by the CLI with rich)."""
