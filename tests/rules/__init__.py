"""The rules: each rule code triggered, its near miss kept; ADR-191's boolean-first reading; nr-llm's own refusals."""
