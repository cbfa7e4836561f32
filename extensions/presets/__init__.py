"""Hydra config groups every experiment can use, found through ``hydra.searchpath: [pkg://extensions.presets]``.

``mode/``: verl's v1 trainer modes (``+mode=sync|colocate_async|separate_async``). The GPU presets (``+gpus=xN``) stay
with each experiment (``experiments/<name>/gpus/``): how a batch grows with the GPUs is the experiment's choice.
"""
