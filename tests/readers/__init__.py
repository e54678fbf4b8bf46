"""Reading: every export shape, container and table of nr-llm into the same steps; the files database tools write; --db."""
