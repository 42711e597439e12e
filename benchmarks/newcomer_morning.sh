#!/bin/bash
# DIR holds proj/ (the workspace), data.yesterday/ (the session after day one), cfg/; REPO is the checkout
REPO=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}; DIR=${DIR:-/tmp/dd_fig}
# one morning: yesterday's data dir, `tailrent --continue` in tmux, the resume line read off the screen,
# one question, quit; then the first request's usage from the journal
URL=$1; name=$2
rm -rf $DIR/data && cp -a $DIR/data.yesterday $DIR/data
cd $DIR/proj
tmux new -d -s m$name -x 140 -y 50 "TAILRENT_MAX_REPLY_TOKENS=40 TAILRENT_CONFIG_DIR=$DIR/cfg TAILRENT_HOME=$DIR/data $REPO/.venv/bin/tailrent --continue --model openai:$URL; sleep 900"
for i in $(seq 1 120); do tmux capture-pane -p -t m$name | grep -aq "resume:" && break; sleep 1; done
sleep 2
tmux capture-pane -p -t m$name -J | grep -a -A3 "resume:\|KV slot\|server's slot" | cut -c1-200 > $DIR/screen-$name.txt
tmux send-keys -t m$name "Good morning. Which item is out of stock?" Enter
for i in $(seq 1 300); do tmux capture-pane -p -t m$name | grep -aq "4 requests" && break; sleep 1; done
sleep 2
tmux capture-pane -p -t m$name -J > $DIR/screen-$name-after.txt
tmux send-keys -t m$name C-q; sleep 5; tmux kill-session -t m$name
$REPO/.venv/bin/python - <<PY
import json, glob
j = glob.glob("$DIR/data/sessions/*/journal.jsonl")[0]
ev = [json.loads(l) for l in open(j) if l.strip()]
u = [e for e in ev if e.get("type") == "usage_recorded"]
last = u[-1]
print("$name", {k: last.get(k) for k in ("context_tokens", "predicted_evaluated", "prompt_tokens", "cached_tokens", "evaluated_tokens", "prompt_ms")})
PY
