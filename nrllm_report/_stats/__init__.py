"""The statistics core while the package is being restructured: moves to ``aggregate/``."""
