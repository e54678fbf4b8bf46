"""The Arrow fast path gives what the row checker gives, row for row, and is the path real exports take."""
