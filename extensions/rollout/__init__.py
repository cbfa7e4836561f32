"""Rollout-only driver: dataset → verl's agent loops → trajectories (JSONL) → HTML viewer.

python -m extensions.rollout experiments/gsm8k_code_verify --limit 4 --out outputs/rollout
"""
