#!/usr/bin/env bash
# The owners' side-by-side benchmark of issue 18 (engrama 0.18.1 and bare SQLite FTS5 on one
# corpus of 5,000 notes and 200 queries), run with this checkout's venv and lexical search:
# the peers match words, while Store.search defaults to hybrid (embedding every question)
# wherever the semantic extra is installed, as it is in a dev install.
#
#   bash bench/peers.sh [ROUNDS]        # ROUNDS rounds in one run (default 3), then the ratios
#
# RUN_SH names the owners' script (default ../shared/bench-peers/run.sh beside the repository,
# else /work/shared/bench-peers/run.sh); ENGRAM_SEARCH_MODE=hybrid measures the default mode.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN_SH=${RUN_SH:-}
if [ -z "$RUN_SH" ]; then
  for candidate in "$ROOT/../shared/bench-peers/run.sh" /work/shared/bench-peers/run.sh; do
    if [ -f "$candidate" ]; then RUN_SH=$candidate; break; fi
  done
fi
: "${RUN_SH:?set RUN_SH to the bench-peers/run.sh of the owners}"
export ENGRAM_PY=${ENGRAM_PY:-$ROOT/.venv/bin/python}
export ENGRAM_SEARCH_MODE=${ENGRAM_SEARCH_MODE:-lexical}
echo "search mode: $ENGRAM_SEARCH_MODE; load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"
bash "$RUN_SH" "${1:-3}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"
