"""Code two or more handler modules share - no handlers here.

Handler modules never import one another (an import-linter contract in pyproject.toml): what two
of them need alike lives in a module of this package, named for what it holds.
"""
