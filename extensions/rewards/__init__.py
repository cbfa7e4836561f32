"""Reward helpers behind ``extensions/custom_rewards.py``.

- ``numbers``: normalise and compare numeric answers.
- ``gsm8k``: strip thinking, extract a GSM8K answer (strict or flexible).
- ``trajectory``: read the agent loop's per-trajectory record out of ``extra_info``.
- ``settings``: the weights and mode set through ``reward_kwargs``.
"""
