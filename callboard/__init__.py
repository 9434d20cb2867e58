"""callboard: a durable actor runtime for AI-agent workloads, on trio."""

__version__ = "0.1.0"
