"""The templates' code as Jinja compiles it (compiler/render/precompile.py generates every module here but this one)."""
