"""``python -m extensions.rollout``: see extensions/rollout/cli.py."""

import sys

from extensions.rollout.cli import main

sys.exit(main())
