"""kvsim: a discrete-event simulator for KV-cache capacity planning of LLM serving."""

__version__ = "0.1.0"
