# The ledgers of this experiment, sourced by run.sh and scripts/gpu/side_runs.sh so that the trainer's
# held-out ledgers and the driver's baselines are the same ones, each over three 4K windows of pages. Sets LEDGER_ARGS (extensions.data.ledger options)
# and FOLD_LOOP (the folding loop of experiments/ledger_folding/agent_loops.yaml for these ledgers).
# LEDGER_QUESTION=balance (default): 20 pages of 16 lines over 6 accounts (over 14K tokens); the asked account's
#   closing balance, with exactly 3 of its transactions
#   anywhere in the ledger. The drawn default (about 53 to add up in the head) left a 0.5B model nothing to
#   learn from; with 3, the work is the horizon: read every page, keep what matters. FOLD_LOOP: folding_workflow.
# LEDGER_QUESTION=lookup: the amount of the one transaction with a given memo reference, on a page drawn
#   uniformly; found, it is copied, not computed. 60 pages of 4 lines (13.3K page tokens): with the page in front
#   of it, the untrained 0.5B names the amount 22 times in 48 at 4 lines a page, 9 in 48 at 16
#   (scripts/ledger_needle_probe.py, docs/results/ledger-folding-cpu). FOLD_LOOP: folding_lookup (its summary
#   says where the search is).
# LEDGER_FOOTER (lookup only; read_on or check, default read_on): each page's last line
#   (extensions/data/ledger.py's page_footer).
# LEDGER_SHAPE replaces the default shape (pages, per-page, accounts, target transactions); the question is
# always LEDGER_QUESTION's.
case ${LEDGER_QUESTION:-balance} in
  balance) LEDGER_ARGS="${LEDGER_SHAPE:---pages 20 --per-page 16 --accounts 6 --target-transactions 3} --question balance"
           FOLD_LOOP=folding_workflow ;;
  lookup) LEDGER_ARGS="${LEDGER_SHAPE:---pages 60 --per-page 4 --accounts 6} --question lookup --footer ${LEDGER_FOOTER:-read_on}"
          FOLD_LOOP=folding_lookup ;;
  *) echo "LEDGER_QUESTION=$LEDGER_QUESTION: expected balance or lookup" >&2; return 2 2>/dev/null || exit 2 ;;
esac
