"""The codebase itself: the package's layers and API style, the docs' links."""
