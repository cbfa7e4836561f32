# The ledgers of this experiment, sourced by run.sh and scripts/gpu/side_runs.sh so that the trainer's
# held-out ledgers and the driver's baselines are the same ones, each over three windows of pages. Sets LEDGER_ARGS (extensions.data.ledger options)
# and FOLD_LOOP (the folding loop of experiments/ledger_folding/agent_loops.yaml for these ledgers).
# LEDGER_QUESTION=balance (default): 20 pages of 16 lines over 6 accounts (over 14K tokens); the asked account's
#   closing balance, with exactly 3 of its transactions
#   anywhere in the ledger. The drawn default (about 53 to add up in the head) left a 0.5B model nothing to
#   learn from; with 3, the work is the horizon: read every page, keep what matters. FOLD_LOOP: folding_workflow.
# LEDGER_QUESTION=lookup: the amount of the one transaction with a given memo reference, on a page drawn
#   uniformly; found, it is copied, not computed. 60 pages of 4 lines (13.3K page tokens): with the page in front
#   of it, the untrained 0.5B names the amount 22 times in 48 at 4 lines a page, 9 in 48 at 16
#   (experiments/ledger_folding/analysis/ledger_needle_probe.py, docs/results/ledger-folding-cpu). FOLD_LOOP: folding_lookup (its summary
#   says where the search is).
# LEDGER_ANSWER (lookup only): tool (default) answers with a submit_answer call (--answer-tool; each page's footer
#   says to call it if the reference is on the page), text with a `#### N` line. On the H200 the text form scored
#   0/128 (ReAct) and 1/128 (folding): the untrained 0.5B never stops calling read_page to write an answer; with the
#   transaction's page as the last tool result it named the amount 0 times in 24 as text and 4 in 24 with
#   submit_answer (experiments/ledger_folding/analysis/ledger_needle_probe.py --in-loop; docs/results/ledger-lookup-h200). In the loop at
#   temperature 1.0 on CPU it answered with the tool in 14 of 24 trajectories, all wrong (ledger-folding-cpu, runs 10-11).
# LEDGER_QUESTION=flagged: the amount of the one transaction marked DISPUTED at the end of its line (--ref-style
#   flag; asked for ref 123456 after reading every page, the untrained 0.5B submitted 123456 itself 8 times in 11), answered
#   with submit_answer as soon as it is found, in a 2K window (800 prompt + 1248 response; the prompt is 389 tokens,
#   a folded segment's up to ~770 with the summary and the last page):
#   30 pages of 4 lines, 7.1K page tokens, 3.5 windows. Training ledgers have 1 to 30 pages (LEDGER_TRAIN_ARGS:
#   the short ones are where an untrained model can earn a reward), the held-out ones 30. FOLD_LOOP: folding_flagged.
# LEDGER_FOOTER (lookup only; read_on, check, submit or end): replaces the answer form's footer
#   (extensions/data/ledger.py's page_footer).
# LEDGER_SHAPE replaces the default shape (pages, per-page, accounts, target transactions); the question is
# always LEDGER_QUESTION's. Also set, each to the preset's value unless already set: LEDGER_TRAIN_ARGS (options
# for the train split only), WINDOW_ARGS (hydra overrides of the window, for every variant) and WIDE_RESPONSE (the
# wide variant's response length).
case ${LEDGER_QUESTION:-balance} in
  balance) LEDGER_ARGS="${LEDGER_SHAPE:---pages 20 --per-page 16 --accounts 6 --target-transactions 3} --question balance"
           LEDGER_TRAIN_ARGS=${LEDGER_TRAIN_ARGS:-} WINDOW_ARGS=${WINDOW_ARGS:-} WIDE_RESPONSE=${WIDE_RESPONSE:-23552}
           FOLD_LOOP=folding_workflow ;;
  lookup) case ${LEDGER_ANSWER:-tool} in
            tool) answer="--answer-tool --footer ${LEDGER_FOOTER:-submit}" ;;
            text) answer="--footer ${LEDGER_FOOTER:-read_on}" ;;
            *) echo "LEDGER_ANSWER=$LEDGER_ANSWER: expected tool or text" >&2; return 2 2>/dev/null || exit 2 ;;
          esac
          LEDGER_ARGS="${LEDGER_SHAPE:---pages 60 --per-page 4 --accounts 6} --question lookup $answer"
          LEDGER_TRAIN_ARGS=${LEDGER_TRAIN_ARGS:-} WINDOW_ARGS=${WINDOW_ARGS:-} WIDE_RESPONSE=${WIDE_RESPONSE:-23552}
          FOLD_LOOP=folding_lookup ;;
  flagged) # LEDGER_ANSWER and LEDGER_FOOTER do not apply: the answer is a submit_answer call, the footer submit
           LEDGER_ARGS="${LEDGER_SHAPE:---pages 30 --per-page 4 --accounts 6} --question lookup --ref-style flag --answer-tool --footer submit"
           LEDGER_TRAIN_ARGS=${LEDGER_TRAIN_ARGS:---min-pages 1}   # --min-pages 30: train on held-out-sized ledgers
           WINDOW_ARGS=${WINDOW_ARGS:-data.max_prompt_length=800 data.max_response_length=1248 actor_rollout_ref.rollout.prompt_length=800 actor_rollout_ref.rollout.response_length=1248}
           # 30 pages of ~270 tokens with their calls fit 8,192, but leave ~18 tokens after page 30: too few to answer
           WIDE_RESPONSE=${WIDE_RESPONSE:-12288}
           FOLD_LOOP=folding_flagged ;;
  *) echo "LEDGER_QUESTION=$LEDGER_QUESTION: expected balance, lookup or flagged" >&2; return 2 2>/dev/null || exit 2 ;;
esac
