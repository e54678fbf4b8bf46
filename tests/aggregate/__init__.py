"""The figures: Wilson intervals, verdicts, change points, comparisons, latency, denials, the merged order."""
