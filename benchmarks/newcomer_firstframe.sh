#!/bin/bash
# DIR/clone is a fresh clone with the README install done; REPO is unused
REPO=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}; DIR=${DIR:-/tmp/dd_fig}
# time from the README's run command (.venv/bin/tailrent) to the first frame: the input's placeholder on screen
cd $DIR/clone
home=$(mktemp -d $DIR/ffhome.XXXX)
s=ff$$
start=$(date +%s.%N)
tmux new -d -s $s -x 120 -y 40 "TAILRENT_HOME=$home TAILRENT_CONFIG_DIR=$home/cfg .venv/bin/tailrent; sleep 30"
while ! tmux capture-pane -p -t $s 2>/dev/null | grep -q "Ask · enter sends"; do sleep 0.05; done
end=$(date +%s.%N)
echo "first frame: $(echo "$end - $start" | bc) s"
tmux send-keys -t $s C-q
sleep 2; tmux kill-session -t $s 2>/dev/null
