"""Warm start: demonstrations played through the real agent loop, then supervised fine-tuning on their tokens.

``ledger_demo`` is a scripted demonstrator of the flagged-ledger task, ``extensions/backends/demo_server.py`` puts any
such policy behind verl's LLM-server interface (``python -m extensions.rollout ... --backend demo``), and ``sft``
fine-tunes a model on the recorded response tokens (mask 1 only), segment by segment.
"""
