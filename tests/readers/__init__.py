"""Reading: every export shape, container and table of nr-llm into the same steps; what database tools write; --db."""
