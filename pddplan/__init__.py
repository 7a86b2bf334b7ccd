"""pddplan: capacity planning for cross-datacenter PDD (Prefill - RelayDecode - MainDecode)
LLM serving."""

__version__ = "0.1.0"
