# The ledgers of this experiment, sourced by run.sh and scripts/gpu/side_runs.sh so that the trainer's
# held-out ledgers and the driver's baselines are the same ones: 20 pages of 16 transactions over 6
# accounts (over 14K tokens, more than three 4K windows) and exactly 3 transactions of the asked
# account, anywhere in the ledger. The drawn default (about 53 of them to add up in the head) left a 0.5B
# model nothing to learn from; with 3, the work is the horizon: read every page, keep what matters.
LEDGER_ARGS=${LEDGER_ARGS:---pages 20 --per-page 16 --accounts 6 --target-transactions 3}
