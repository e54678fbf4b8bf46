"""nrllm-report: nr-llm agent-run exports as a bilingual static website."""

__version__ = "0.1.0"
