"""The build engine: its stages, partitions, forked workers, the input cache and bounded memory."""
