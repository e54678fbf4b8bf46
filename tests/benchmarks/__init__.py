"""The benchmarks' own scripts on tiny inputs in a temporary folder, and the sample's generator."""
