"""The commands as a user runs them: validate, normalize, gate, diff, the archive, progress, exit codes."""
