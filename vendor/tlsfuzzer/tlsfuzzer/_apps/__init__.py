"""A package containing standalone app entry points."""
