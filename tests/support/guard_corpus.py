"""A labelled corpus for the fact guard: coding-session chat, each line with the facts it holds.

Written by hand for the guard (issue 11), from the rules below, not from what
the extractor returns. Shared by tests/test_guard_corpus.py (which asserts the
goals) and benchmarks/guard_bench.py (which prints the figures).

How a line is labelled
======================

A fact is a detail a fold's summary must keep. It is labelled with its exact
surface text, as written in the line.

* Atoms do not nest: where two could overlap, the longer one is the fact
  ("src/auth/token.py", not "token.py"; "localhost:6379", not ":6379";
  "--timeout=30s", not "30s"; "Terraform 1.5.7", not "1.5.7").
* A quoted string (double, single, curly quotes or backticks) is a fact with
  its quote marks, and the atoms inside it are facts too. So is a reason
  clause: "because", causal "since", "due to", "so that", "given that", "in
  order to", "owing to", to the end of its sentence (or ";"), without the final
  punctuation.
* Names: CamelCase, snake_case, SCREAMING_CASE, acronyms of two capitals or
  more (but not chatter: PR, OK, FYI, LGTM, WIP, TODO, DECISION), words with
  digits (arm64, S3, Q3, p99), dotted code names and hosts (requests.get,
  db.internal), capitalised words mid-sentence that are not function words,
  months or days (Redis, Priya, Grafana), one fact per word ("Cloud", "Run").
  A plain capitalised word at the start of a sentence (the first word, or the
  first after ". ", ": ", a line break) is not labelled unless the same line
  capitalises it mid-sentence too: without a dictionary "Redis is down" and
  "Ran the suite" look alike. A word with an inner capital, digit or
  underscore (PostgreSQL, MySQL) is a name anywhere. A name with its number is
  one fact ("PostgreSQL 16", "Node 18").
* Plain lowercase words are not facts, even package names (httpx, kubectl):
  the version or pin next to them is.
* Numbers need a unit: time, size, rate, currency ("$4,200", "€30", "12 USD"),
  percent, multiplier ("3.5x"), or the noun the number counts, right after it
  ("3 replicas", "48 files"). Dates (ISO, "March 3", "June 2026"), clock times
  with their zone ("02:00 UTC", "9:30am", "3pm"), durations in words ("twenty
  minutes") and issue references ("#482") are facts. Bare numbers ("turn 5",
  "12 of them", "3 times"), number words that are not durations ("two
  attempts") and weekdays are not.
* Versions: "v2.3.1", "1.4.2", "1.x", "v2.0.1-rc1", constraints with their
  operator ("^2.7.0", "~0.27", ">=3.11", "< 2.0"), pins with their package
  ("requests==2.31.0", "numpy<2", "react@18.2.0"), images with their tag
  ("python:3.12-slim").
* Code and operations: paths, URLs (any scheme, and git's "git@host:path"),
  ports ("port 5433", ":8080", "localhost:6379", "5432:5432"), IPv4 and IPv6
  addresses with their CIDR, commit hashes (7 to 40 lowercase hex with a digit
  and a letter), environment variables ("DATABASE_URL", "$HOME",
  "${NODE_ENV}", "LOG_LEVEL=debug"), command-line flags ("--dry-run",
  "--timeout=30s"; a flag takes a numeric value: "--max-retries 5", "-n 4"),
  function calls written with their parentheses ("parse_args()"), error codes
  ("E1101", "ERR_CONN_RESET", "ORA-00942", "HTTP 503", "status 401", "exit
  code 137", "error 23505", "429 Too Many Requests"), cloud regions, ticket
  ids ("PAY-4412", "CVE-2024-3094"), cron expressions ("0 2 * * *"),
  Kubernetes resources ("deployment/api-gateway"), MIME types, HTTP headers
  ("X-Request-ID"), accounts ("svc-deploy@corp.example", "@maria").
* The name of a table, queue, topic, flag, migration, branch, bucket or
  namespace, when it looks like code (a hyphen, underscore, digit or slash) and
  its noun is next to it: "billing-events" in "queue billing-events",
  "orders_v2" in "the orders_v2 table". The noun is not part of the fact.
* Chat-template tokens ("<|im_end|>", "<start_of_turn>", "[INST]", "</s>")
  and their fragments ("im_start", "<|im_") are never facts; the facts around
  them still are.

How the test scores it
======================

An extracted fact matches a labelled one when their texts are equal after
case folding and collapsing whitespace (kinds are not compared). Each line's
facts are compared as sets; precision and recall are summed over the corpus.

DEV is what the extractor was tuned against. HELD_OUT was written at the same
time, before the extractor changed, and was not looked at until the end; its
first figures are recorded in the commit that added it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

Case = tuple[str, tuple[str, ...]]


def _c(text: str, *facts: str) -> Case:
    return (text, facts)


DEV: list[Case] = [
    # ports and addresses
    _c("The replica listens on port 5433, not the default.", "port 5433"),
    _c("Postgres on the new box listens on port 5433 now.", "port 5433"),
    _c("The dev server is up on :8080 now.", ":8080"),
    _c("Point the test client at localhost:6379.", "localhost:6379"),
    _c("The compose file maps 5432:5432 for the local database.", "5432:5432"),
    _c(
        "Grafana moved to port 3001 because 3000 clashes with the frontend.",
        "port 3001",
        "because 3000 clashes with the frontend",
    ),
    _c("Our VPC is 10.0.0.0/16 and the bastion sits at 10.0.4.12.", "VPC", "10.0.0.0/16", "10.0.4.12"),
    _c("The pod resolves localhost to ::1 first, which the server does not bind.", "::1"),
    _c("Whitelist 203.0.113.7 on the firewall for the vendor callback.", "203.0.113.7"),
    _c("The service mesh hands out addresses from fd00:10:96::/112.", "fd00:10:96::/112"),
    _c("Ollama answers on 127.0.0.1:11434 only, so the container cannot reach it.", "127.0.0.1:11434"),
    _c("The health check hits http://localhost:8080/healthz every 10 seconds.", "http://localhost:8080/healthz", "10 seconds"),
    # regions
    _c("Staging runs in eu-west-2 and production in us-east-1.", "eu-west-2", "us-east-1"),
    _c("Deploy to the eu-west-2 region with PostgreSQL 16.", "eu-west-2", "PostgreSQL 16"),
    _c("We mirrored the bucket to europe-west4 for the data residency review.", "europe-west4"),
    _c("The EKS node group in ap-southeast-1 has 6 nodes.", "EKS", "ap-southeast-1", "6 nodes"),
    _c("Failover goes to us-west-2 if us-east-1 is down for more than 5 minutes.", "us-west-2", "us-east-1", "5 minutes"),
    _c("The Azure resources live in westeurope, the backups in northeurope.", "Azure", "westeurope", "northeurope"),
    _c("The Cloud Run service in us-central1 cold-starts in about 2 seconds.", "Cloud", "Run", "us-central1", "2 seconds"),
    _c("Latency from ap-northeast-1 to the primary is around 180 ms.", "ap-northeast-1", "180 ms"),
    _c("The S3 bucket sits in eu-central-1, so cross-region reads cost extra.", "S3", "eu-central-1"),
    # tickets
    _c("I'll link this to ticket PAY-4412 before I push.", "PAY-4412"),
    _c("This is the same crash as JIRA-12, closing it as a duplicate.", "JIRA-12"),
    _c("OPS-318 tracks the certificate rotation.", "OPS-318"),
    _c("Moved the flaky test to INFRA-2207 so it does not block the release.", "INFRA-2207"),
    _c("The fix for CVE-2024-3094 is to pin xz to 5.4.6.", "CVE-2024-3094", "5.4.6"),
    _c("Blocked on SEC-77 until security signs off.", "SEC-77"),
    _c("Closes #482 and refs #490.", "#482", "#490"),
    # commit hashes
    _c("Reverted a3f9c21 because it broke the login redirect.", "a3f9c21", "because it broke the login redirect"),
    _c("The fix landed in commit 4e1d0b7f9a2c.", "4e1d0b7f9a2c"),
    _c("Bisect points at 9c0ffee1 as the first bad commit.", "9c0ffee1"),
    _c("Cherry-picked 1f2e3d4c5b6a7980 onto the release branch.", "1f2e3d4c5b6a7980"),
    _c("HEAD is at 7b3e2a1 after the rebase.", "HEAD", "7b3e2a1"),
    # environment variables
    _c("Set DATABASE_URL in the CI secrets, not in the repo.", "DATABASE_URL", "CI"),
    _c("The script reads $HOME and falls back to /tmp when it is unset.", "$HOME", "/tmp"),
    _c("Export OLLAMA_HOST=0.0.0.0 before starting the server.", "OLLAMA_HOST=0.0.0.0"),
    _c("The build fails when ${NODE_ENV} is not set.", "${NODE_ENV}"),
    _c("PATH does not include ~/.local/bin in the cron environment.", "PATH", "~/.local/bin"),
    _c("Remember to unset AWS_PROFILE before running the tests.", "AWS_PROFILE"),
    _c("LOG_LEVEL=debug makes the worker far too chatty.", "LOG_LEVEL=debug"),
    # paths
    _c("I patched src/billing/invoice.py and tests/test_invoice.py.", "src/billing/invoice.py", "tests/test_invoice.py"),
    _c("The config lives in ~/.config/tailrent/config.toml.", "~/.config/tailrent/config.toml"),
    _c("Nginx logs go to /var/log/nginx/error.log on that host.", "/var/log/nginx/error.log"),
    _c("Edit pyproject.toml and drop the old setup.cfg.", "pyproject.toml", "setup.cfg"),
    _c("The Dockerfile copies ./dist into /app.", "Dockerfile", "./dist", "/app"),
    _c("Windows users need C:\\Users\\dev\\AppData\\Local\\tailrent instead.", "C:\\Users\\dev\\AppData\\Local\\tailrent"),
    _c("Secrets are mounted at /run/secrets/db_password.", "/run/secrets/db_password"),
    _c("The generated client is in packages/api-client/src/index.ts.", "packages/api-client/src/index.ts"),
    _c("Add .env to the .gitignore please.", ".env", ".gitignore"),
    _c("Makefile targets now call scripts/lint.sh.", "scripts/lint.sh"),
    # URLs
    _c("The docs are at https://docs.example.com/guard#facts if you need them.", "https://docs.example.com/guard#facts"),
    _c("Webhook target is https://hooks.example.net/v1/deploy?env=prod.", "https://hooks.example.net/v1/deploy?env=prod"),
    _c("The registry mirror is https://registry.internal:5000 now.", "https://registry.internal:5000"),
    _c("Clone it from git@github.com:acme/payments.git instead of HTTPS.", "git@github.com:acme/payments.git", "HTTPS"),
    _c("Grafana dashboard: https://grafana.internal/d/abc123/api-latency", "https://grafana.internal/d/abc123/api-latency"),
    _c("Pull from s3://acme-backups/2025/03/ for the restore.", "s3://acme-backups/2025/03/"),
    _c("The DSN is postgres://app@db.internal:5432/orders.", "DSN", "postgres://app@db.internal:5432/orders"),
    # versions
    _c("Bumped pydantic to ^2.7.0 and pinned httpx to ~0.27.", "^2.7.0", "~0.27"),
    _c("The lockfile now says requests==2.31.0 and urllib3>=2.0.7.", "requests==2.31.0", "urllib3>=2.0.7"),
    _c("We need Python >=3.11 for the TaskGroup API.", "Python", ">=3.11", "TaskGroup", "API"),
    _c("Tagged v2.0.1-rc1 for the canary.", "v2.0.1-rc1"),
    _c("The frontend is on react@18.2.0 and next@14.1.3.", "react@18.2.0", "next@14.1.3"),
    _c("Node 20 is the floor; Node 18 goes end of life in April.", "Node 20", "Node 18", "April"),
    _c("Downgrade to 1.4.2 until upstream fixes the regression.", "1.4.2"),
    _c("Keep numpy<2 until the pandas upgrade lands.", "numpy<2"),
    _c("The image is built from python:3.12-slim.", "python:3.12-slim"),
    _c("We are still on Terraform 1.5.7 because of the license change.", "Terraform 1.5.7", "because of the license change"),
    _c("The SDK requires >= 1.9, < 2.0 of protobuf.", "SDK", ">= 1.9", "< 2.0"),
    _c("Constraint ~=1.4 keeps us on the 1.x line.", "~=1.4", "1.x"),
    _c("Moving the base image to Ubuntu 24.04 next sprint.", "Ubuntu 24.04"),
    # cron
    _c("The backup cron is 0 2 * * * in UTC.", "0 2 * * *", "UTC"),
    _c("Changed the schedule to */15 * * * * so the sync catches up faster.", "*/15 * * * *"),
    _c("The report job runs 30 6 * * 1-5, weekdays only.", "30 6 * * 1-5"),
    _c("Cleanup is 0 */6 * * * and takes about 4 minutes.", "0 */6 * * *", "4 minutes"),
    _c("Use 0 0 1 * * for the monthly invoice run.", "0 0 1 * *"),
    # Kubernetes
    _c("Run kubectl rollout restart deployment/api-gateway after the config change.", "deployment/api-gateway"),
    _c("The svc/payments-internal service has no endpoints right now.", "svc/payments-internal"),
    _c("I edited configmap/feature-flags and bounced the pods.", "configmap/feature-flags"),
    _c("kubectl logs pod/worker-7d9f8 -c sidecar shows the same timeout.", "pod/worker-7d9f8"),
    _c("The secret/db-credentials object was rotated yesterday.", "secret/db-credentials"),
    _c("Scale statefulset/kafka to 5 replicas before the load test.", "statefulset/kafka", "5 replicas"),
    _c("ingress/public still points at the old service.", "ingress/public"),
    _c("The namespace payments-staging has a quota of 8 CPUs.", "payments-staging", "8 CPUs"),
    # flags
    _c("Try it again with --max-retries 5 and --timeout=30s.", "--max-retries 5", "--timeout=30s"),
    _c("pytest -n 4 cut the run from 9 minutes to 3 minutes.", "-n 4", "9 minutes", "3 minutes"),
    _c("Pass --dry-run first so nothing is deleted.", "--dry-run"),
    _c("The CLI ignores --verbose when --quiet is also set.", "CLI", "--verbose", "--quiet"),
    _c("Add --no-cache to the docker build in the pipeline.", "--no-cache"),
    _c("git log -n 20 --oneline shows the merge is not there.", "-n 20", "--oneline"),
    _c("Run it with -j 8 on the build box.", "-j 8"),
    _c("The --policy ladder option is the default now.", "--policy"),
    # functions
    _c("The bug is in parse_args() when the config path is empty.", "parse_args()"),
    _c("Rename fetchUser() to loadUser() in the hooks.", "fetchUser()", "loadUser()"),
    _c("render() is called twice on every keystroke.", "render()"),
    _c("Wrap the call to session.commit() in a retry.", "session.commit()"),
    _c("The leak comes from os.path.join() building paths in a loop.", "os.path.join()"),
    _c("Mock out requests.get inside fetch_rates before the test runs.", "requests.get", "fetch_rates"),
    _c("useEffect runs before the data arrives.", "useEffect"),
    _c("The handler calls validate_order(order) twice.", "validate_order"),
    # error codes
    _c("pylint flags E1101 on every Django model access.", "E1101", "Django"),
    _c("The client throws ERR_CONN_RESET after about 60 seconds idle.", "ERR_CONN_RESET", "60 seconds"),
    _c("The gateway returned HTTP 503 for twenty minutes during the deploy.", "HTTP 503", "twenty minutes"),
    _c("Oracle raises ORA-00942 because the synonym was dropped.", "ORA-00942", "because the synonym was dropped"),
    _c("Datadog shows a spike of 502s at 14:05.", "502s", "14:05"),
    _c("The job dies with exit code 137 when memory runs out.", "exit code 137"),
    _c("The endpoint answers 429 Too Many Requests above 100 rps.", "429 Too Many Requests", "100 rps"),
    _c("Node crashes with ECONNREFUSED when Redis is not up yet.", "ECONNREFUSED", "Redis"),
    _c("The login call returns status 401 when the token is expired.", "status 401"),
    _c("The build log shows TS2345 in three files.", "TS2345"),
    _c("Postgres error 23505 means the unique constraint fired.", "error 23505"),
    _c("The upload fails with 413 Payload Too Large above 10 MB.", "413 Payload Too Large", "10 MB"),
    _c("Rust gives E0502 for that borrow.", "E0502"),
    _c("That is a 404 Not Found from the CDN, not from our app.", "404 Not Found", "CDN"),
    # money
    _c("The new cluster costs $4,200 a month, about €3,900.", "$4,200", "€3,900"),
    _c("Budget is 12 USD per day for the GPU runners.", "12 USD", "GPU"),
    _c("Egress alone was £1,150 last month.", "£1,150"),
    _c("At $3/MTok the whole week cost us $18.40.", "$3/MTok", "$18.40"),
    _c("That instance type is 0.096 USD per hour.", "0.096 USD"),
    _c("Support quoted 2,500 EUR for the extended license.", "2,500 EUR"),
    # counts and durations
    _c("Scaled the API to 3 replicas and set the probe timeout to 500 ms.", "API", "3 replicas", "500 ms"),
    _c("The lock is held in 15 minute windows.", "15 minute"),
    _c("The worker pool now has 16 workers and a 2 GB memory cap.", "16 workers", "2 GB"),
    _c("Logs rotate daily and we keep 14 days of them.", "14 days"),
    _c("The suite has 1,284 tests and 12 of them are skipped.", "1,284 tests"),
    _c("The import touched 48 files across 6 packages.", "48 files", "6 packages"),
    _c("Retry with backoff: 3 retries, starting at 200ms.", "3 retries", "200ms"),
    _c("The table has 120M rows, so the migration needs batching.", "120M rows"),
    _c("Each shard holds 250 GB and we run 12 shards.", "250 GB", "12 shards"),
    _c("The pool maxes out at 20 connections per instance.", "20 connections"),
    _c("Session tokens expire after 24 hours.", "24 hours"),
    _c("The fold trigger sits at 90% of the window.", "90%"),
    _c("We saw a 3.5x speedup on the cold path.", "3.5x"),
    _c("The queue drained in 42s once the consumer restarted.", "42s"),
    _c("Keep the keep-alive at 30m for the local model.", "30m"),
    _c("It took 7 attempts to reproduce it locally.", "7 attempts"),
    _c("The cache is capped at 512 MiB per node.", "512 MiB"),
    _c("We ship every 2 weeks, on the release train.", "2 weeks"),
    _c("Timeouts went from 1.2% to 0.05% of requests.", "1.2%", "0.05%"),
    _c("The context window is 32k tokens.", "32k tokens"),
    _c("That endpoint is limited to 600 requests per minute.", "600 requests"),
    # dates and times
    _c("The cutover is scheduled for 2025-03-14 at 02:00 UTC.", "2025-03-14", "02:00 UTC"),
    _c("The freeze starts on March 3 and lasts a week.", "March 3"),
    _c("The certificate expires 2026-01-31T23:59:59Z.", "2026-01-31T23:59:59Z"),
    _c("Standup moved to 9:30am for the rest of the sprint.", "9:30am"),
    _c("The maintenance window is 01:00-03:00 UTC on Sundays.", "01:00-03:00 UTC"),
    _c("The vendor deprecates the v1 API in June 2026.", "v1", "API", "June 2026"),
    _c("Let's do the retro at 3pm.", "3pm"),
    _c("Q3 planning needs the cost numbers.", "Q3"),
    # tables, queues, flags, migrations, branches
    _c("Move the orders_v2 table to the archive schema before Friday.", "orders_v2"),
    _c("Consumers on queue billing-events are lagging by 40k messages.", "billing-events", "40k messages"),
    _c("Run migration 0042_add_index on staging first.", "0042_add_index"),
    _c("Turn off flag new-checkout for EU customers until the fix ships.", "new-checkout", "EU"),
    _c("The feature flag checkout-v3 is at 10% rollout.", "checkout-v3", "10%"),
    _c("Messages that fail three times land in the billing-events-dlq queue.", "billing-events-dlq"),
    _c("I rebased branch fix/token-ttl onto main.", "fix/token-ttl"),
    _c("The topic order-created has 12 partitions.", "order-created", "12 partitions"),
    _c("Drop the user_sessions_old table once the backfill is verified.", "user_sessions_old"),
    _c("The bucket acme-prod-logs is public by mistake.", "acme-prod-logs"),
    _c("Index idx_orders_created_at makes the report query fast.", "idx_orders_created_at"),
    _c("The migration 20240611_split_names failed halfway.", "20240611_split_names"),
    # headers and accounts
    _c("Every request must carry X-Request-ID so we can trace it.", "X-Request-ID"),
    _c("The proxy strips the Authorization header on redirects.", "Authorization"),
    _c("Deploys run as svc-deploy@corp.example with a scoped token.", "svc-deploy@corp.example"),
    _c("Send the alerts to oncall-payments@acme.io.", "oncall-payments@acme.io"),
    _c("The upstream ignores If-None-Match, so caching never kicks in.", "If-None-Match"),
    _c("Set Cache-Control to no-store on the token endpoint.", "Cache-Control"),
    _c("Retry-After comes back as 120 on throttled calls.", "Retry-After"),
    _c("The service account is ci-runner@acme-prod.iam.gserviceaccount.com.", "ci-runner@acme-prod.iam.gserviceaccount.com"),
    _c("Ping @maria about the schema change.", "@maria"),
    _c("Use the Content-Type application/json for the webhook.", "Content-Type", "application/json"),
    # names
    _c("We picked Kafka over RabbitMQ because we need replay.", "Kafka", "RabbitMQ", "because we need replay"),
    _c("DECISION: keep sessions in Redis with a 30 minute TTL.", "Redis", "30 minute", "TTL"),
    _c("Decision: the retry budget stays at 3 attempts per job.", "3 attempts"),
    _c("The RefreshTokenService now reads REFRESH_TTL from config.", "RefreshTokenService", "REFRESH_TTL"),
    _c("I asked Priya to review the Terraform plan.", "Priya", "Terraform"),
    _c("We moved the sessions from Memcached to Postgres last week.", "Memcached", "Postgres"),
    _c("The maxRetries field is ignored by the Go client.", "maxRetries", "Go"),
    _c("Switch the logger to JSON output for Loki.", "JSON", "Loki"),
    _c("The arm64 runners are twice as fast for the build.", "arm64"),
    _c("Our p99 latency went from 180ms to 95ms after the index.", "p99", "180ms", "95ms"),
    _c("The container gets OOM-killed at 512Mi.", "OOM", "512Mi"),
    # quotes
    _c("Call the setting `fold_target` and document it.", "`fold_target`", "fold_target"),
    _c('The error says "connection refused" every time.', '"connection refused"'),
    _c("Run `make test` before pushing.", "`make test`"),
    _c("Label the alert 'payments-critical' in PagerDuty.", "'payments-critical'", "PagerDuty"),
    # reasons
    _c("We batch writes since the API is rate limited.", "since the API is rate limited", "API"),
    _c("The job failed due to a missing index on the orders table.", "due to a missing index on the orders table"),
    _c("Pin it so that later folds can't touch it.", "so that later folds can't touch it"),
    _c("We keep the old endpoint because two mobile releases still call it.", "because two mobile releases still call it"),
    _c("I split the test in order to isolate the race.", "in order to isolate the race"),
    _c("The deploy was rolled back owing to a spike in errors.", "owing to a spike in errors"),
    # tool chatter
    _c("$ pytest tests/test_guard.py -q\n42 passed in 1.31s", "tests/test_guard.py", "1.31s"),
    _c("Ran `npm run build`: done in 38.2s, bundle is 412 kB.", "`npm run build`", "38.2s", "412 kB"),
    _c("git push rejected: the remote has 3 commits you do not have.", "3 commits"),
    _c("Tool output: wrote 1,024 lines to /tmp/out.txt", "1,024 lines", "/tmp/out.txt"),
    _c("grep found 17 matches in src/", "17 matches", "src/"),
    _c("docker ps shows the api container restarting every 45 seconds.", "45 seconds"),
    # chat-template tokens around facts
    _c("<|im_start|>assistant\nThe replica listens on port 5433.<|im_end|>", "port 5433"),
    _c("[INST] bump the timeout to 45s [/INST]", "45s"),
    _c("<start_of_turn>user\nwhy is eu-west-2 slower?<end_of_turn>", "eu-west-2"),
    # no facts: chatter, status, tool noise
    _c("Looks good to me, merging now."),
    _c("Running the test suite again."),
    _c("That fixed it, the build is green."),
    _c("Let me read the handler before I change anything."),
    _c("I'll refactor the retry loop next."),
    _c("Can you take a look at the failing test?"),
    _c("Done, no issues found."),
    _c("Pushed the branch, waiting for review."),
    _c("The linter is happy now."),
    _c("Hmm, that's odd, it worked locally."),
    _c("I reverted my last change."),
    _c("Still flaky, I'll rerun it."),
    _c("Let me check the logs first."),
    _c("Nothing obvious in the stack trace."),
    _c("The tests pass on my machine."),
    _c("I think the cache is stale."),
    _c("Good catch, I missed that."),
    _c("Switching to the other branch to compare."),
    _c("Writing the migration now."),
    _c("I added a regression test for it."),
    _c("The read-only replica is fine, the primary is the problem."),
    _c("We need a follow-up to clean this up."),
    _c("It's a long-lived connection, so it survives the restart."),
    _c("Thanks, that makes sense."),
    _c("Okay, next step is the docs."),
    _c("Ran the integration suite against the staging cluster."),
    _c("Turn 12: Ran the integration suite against the staging cluster."),
    _c("Turn 7: Investigated a flaky test in the billing module."),
    _c("Checked memory usage on the worker pool overnight."),
    _c("Updated the changelog for the upcoming release."),
    _c("Turn 3: Reviewed the PR that touches the rate limiter."),
    _c("I think the PR is OK, FYI, LGTM."),
    _c("Sure, go ahead."),
    _c("The diff is small, mostly renames."),
    _c("Let's pair on this after lunch."),
    _c("Are we sure this is thread-safe?"),
    _c("It's a one-line change."),
    _c("See turn 5 and step 3 of the plan."),
    _c("Give me a minute to check."),
    _c("The first two attempts timed out."),
    _c("I tried it 3 times and it failed twice."),
    _c("I'll look into it tomorrow."),
    _c("Let's go through the failures one by one."),
    _c("That test was flaky before my change too."),
    _c("Rebasing onto main now."),
    _c("Nothing changed since Monday."),
    _c("It has been flaky ever since the upgrade."),
    _c("Use and/or read/write access as you see fit."),
    _c("The mobile team's client can't do it."),
    _c("We met on Friday to talk about it. May I ask?"),
    _c("Agreed, looks good to me."),
    _c("Let me know when the deploy is done."),
    _c("I cleaned up the imports while I was there."),
    _c("The error message is misleading, I'll reword it."),
    _c("The fix is trivial once you see it."),
    _c("Should we add a retry here or fail fast?"),
    _c("I'm not convinced the index helps."),
    _c("Could be a race between the two workers."),
    _c("The third-party client is the slow part."),
    _c("Please keep the tests deterministic."),
    _c("I'll squash the commits before merging."),
    _c("Back from lunch, picking this up again."),
    _c("Oops, wrong terminal."),
    _c("That was because."),
    _c("The build is green on the main branch."),
    _c("I'd rather not touch the legacy code today."),
    _c("We can drop the workaround after the upgrade."),
    _c("[inline] token token token token token token"),
    _c("The old behaviour was a bug, not a feature."),
    _c("It works, but the naming is confusing."),
    _c("Let me summarize what we have so far."),
    _c("Yes, that's the one."),
    _c("The job queue is empty again."),
    _c("The high-priority queue drains first, as it should."),
    _c("The flag is off everywhere now."),
    _c("Deleted the stale branch after the merge."),
    _c("The service restarts cleanly now."),
    _c("Tests are slow but they pass."),
    _c("Going to grab a coffee, back soon."),
    _c("That's a fair point, let me rethink it."),
    _c("I left a comment on the retry logic."),
    _c("Rerunning with more logging."),
    # chat-template tokens alone: never facts
    _c("<|im_end|>"),
    _c("<|im_start|>user"),
    _c("<|im_start|>assistant\nSure, running it now.<|im_end|>"),
    _c("<start_of_turn>model\nOkay, looking into it.<end_of_turn>"),
    _c("</s>"),
    _c("[INST] keep going [/INST]"),
    _c("<|eot_id|><|start_header_id|>assistant<|end_header_id|>"),
    _c("<|endoftext|>"),
    _c("<<SYS>>\nYou are a helpful assistant.\n<</SYS>>"),
    _c("<|im_"),
    _c("im_start im_end im_"),
    _c("<s>[INST] continue [/INST]"),
    _c("<|user|>\nwhat next?\n<|assistant|>"),
    _c("<|im_start|>system\nyou are a coding agent<|im_end|>"),
]

HELD_OUT: list[Case] = [
    _c("The metrics endpoint moved to port 9102 after the sidecar change.", "port 9102"),
    _c("Redis in the test stack binds 0.0.0.0:6380 so it does not clash.", "0.0.0.0:6380"),
    _c("The read replica lives in us-east-2, the writer in us-east-1.", "us-east-2", "us-east-1"),
    _c("Our GCP project is pinned to asia-southeast1 for latency.", "GCP", "asia-southeast1"),
    _c("Filed it as CORE-981 with the repro steps.", "CORE-981"),
    _c("Same root cause as WEB-1203 from last quarter.", "WEB-1203"),
    _c("The regression came in with 5d41402a and went out with 0a1b2c3d4e.", "5d41402a", "0a1b2c3d4e"),
    _c("Make sure REDIS_URL points at the cluster endpoint.", "REDIS_URL"),
    _c("The installer writes to $XDG_CONFIG_HOME when it is set.", "$XDG_CONFIG_HOME"),
    _c("Logs are under /var/lib/tailrent/sessions/ on the server.", "/var/lib/tailrent/sessions/"),
    _c("I touched app/models/user.rb and spec/models/user_spec.rb.", "app/models/user.rb", "spec/models/user_spec.rb"),
    _c("The status page is https://status.example.org/incidents/42.", "https://status.example.org/incidents/42"),
    _c("Upgrade eslint to ^9.0.0 once the plugins catch up.", "^9.0.0"),
    _c("We pin django>=4.2,<5.0 in the constraints file.", "django>=4.2,<5.0"),
    _c("v3.2.0 is the last release with the old config format.", "v3.2.0"),
    _c("The nightly export runs at 15 3 * * * on the replica.", "15 3 * * *"),
    _c("kubectl describe hpa/checkout shows it stuck at 2 replicas.", "hpa/checkout", "2 replicas"),
    _c("Delete cronjob/report-weekly, the new job replaces it.", "cronjob/report-weekly"),
    _c("Rerun the import with --batch-size 500 and --resume.", "--batch-size 500", "--resume"),
    _c("head -n 50 on the log shows the first failure.", "-n 50"),
    _c("handle_webhook() swallows the exception and returns early.", "handle_webhook()"),
    _c("The old getCartTotal() rounded before summing.", "getCartTotal()"),
    _c("flake8 reports W503 and E501 on the generated code.", "flake8", "W503", "E501"),
    _c("Calls to the ledger fail with ERR_TLS_CERT_ALTNAME_INVALID in staging.", "ERR_TLS_CERT_ALTNAME_INVALID"),
    _c("The load balancer gave us HTTP 504 on long exports.", "HTTP 504"),
    _c("MySQL error 1213 means a deadlock, so retrying is safe.", "MySQL", "error 1213"),
    _c("The extra replica adds $310 per month.", "$310"),
    _c("Our monthly spend on tokens is about 85 USD.", "85 USD"),
    _c("The migration batch size is 5,000 rows with a 200 ms pause.", "5,000 rows", "200 ms"),
    _c("The node has 64 GB of RAM and 16 cores.", "64 GB", "RAM", "16 cores"),
    _c("Builds take 11 minutes on the shared runners.", "11 minutes"),
    _c("Coverage dropped to 81.5% after the refactor.", "81.5%"),
    _c("The change freeze ends 2025-12-01 at 08:00 CET.", "2025-12-01", "08:00 CET"),
    _c("The invoice run happens on the 1st at 06:30.", "06:30"),
    _c("The events_raw table grows by 2 GB a day.", "events_raw", "2 GB"),
    _c("Purge the queue email-outbound before the replay.", "email-outbound"),
    _c("Flag beta-invoices stays off for enterprise accounts.", "beta-invoices"),
    _c("Apply migration 0057_drop_legacy_columns after the deploy.", "0057_drop_legacy_columns"),
    _c("Propagate X-Correlation-ID to the downstream calls.", "X-Correlation-ID"),
    _c("The CDN caches responses without a Vary header.", "CDN", "Vary"),
    _c("Backups are uploaded by backup-bot@acme.internal every night.", "backup-bot@acme.internal"),
    _c("We chose SQLite over DuckDB because the writes are tiny.", "SQLite", "DuckDB", "because the writes are tiny"),
    _c("Ask Tomasz whether the Helm chart pins the image digest.", "Tomasz", "Helm"),
    _c("The cache key includes tenant_id and locale.", "tenant_id"),
    _c("The timeout is 2.5s in the client and 5s at the proxy.", "2.5s", "5s"),
    _c("Set `max_tokens` to 4096 for the summarizer.", "`max_tokens`", "max_tokens"),
    _c(
        "The deploy failed due to a missing IAM permission on the bucket.", "due to a missing IAM permission on the bucket", "IAM"
    ),
    _c("<|im_start|>assistant\nRolled back to v1.8.3.<|im_end|>", "v1.8.3"),
    _c("<start_of_turn>model\nThe job now runs every 10 minutes.<end_of_turn>", "10 minutes"),
    _c("We need 4 vCPUs for the indexer.", "4 vCPUs"),
    _c("Connection pool exhaustion started around 11:40 UTC.", "11:40 UTC"),
    _c("The bastion's address is 192.168.10.5, behind the VPN.", "192.168.10.5", "VPN"),
    _c("Allow 172.16.0.0/12 in the security group.", "172.16.0.0/12"),
    _c("The docs for the flag are at https://example.dev/cli#retries.", "https://example.dev/cli#retries"),
    _c("The Lambda in eu-north-1 times out after 15 minutes.", "Lambda", "eu-north-1", "15 minutes"),
    _c("The staging DB listens on :5434 to avoid the local one.", "DB", ":5434"),
    _c("Pin the base image to node:20.11-alpine.", "node:20.11-alpine"),
    _c("Fixed in 3e7a9b1, released in 4.18.2.", "3e7a9b1", "4.18.2"),
    _c("The alert fires when the queue depth passes 10k messages.", "10k messages"),
    _c("The feature flag is called search-v2 in the dashboard.", "search-v2"),
    _c("Spent 40 minutes chasing a typo in the YAML.", "40 minutes", "YAML"),
    # no facts
    _c("Okay, trying that now."),
    _c("No luck, same failure."),
    _c("I'll leave a comment on the review."),
    _c("Merged, thanks for the quick look."),
    _c("Let me think about the naming a bit more."),
    _c("The warning is harmless, we can ignore it."),
    _c("I need to re-read the spec before answering."),
    _c("This looks like a caching issue to me."),
    _c("Rolling back was the right call."),
    _c("Let me write a quick script to check it."),
    _c("It's deterministic now, the flake is gone."),
    _c("The refactor is done, only docs left."),
    _c("I'm going to split this into two commits."),
    _c("Not sure, let me dig a bit deeper."),
    _c("We should talk to the owners first."),
    _c("The happy path works, the edge cases don't."),
    _c("Tests are running, should take a while."),
    _c("Right, that explains the behaviour."),
    _c("I've updated the comments to match."),
    _c("The build broke again, looking now."),
    _c("Fine by me."),
    _c("Looks like a permissions problem on the runner."),
    _c("It's a well-known footgun in the client library."),
    _c("Turn 40: done, no issues found."),
    _c("Turn 41: Updated the changelog for the upcoming release."),
    _c("Let's keep it simple for now."),
    _c("Wait, the other test is failing now."),
    _c("I'll double-check the rollback plan."),
    _c("Pretty sure that's a red herring."),
    _c("<|im_end|><|im_start|>assistant"),
    _c("<end_of_turn>\n<start_of_turn>user"),
    _c("[/INST]"),
    _c("<|start_header_id|>user<|end_header_id|>"),
    _c("</s><s>"),
    _c("<|im_sep|>"),
    _c("<|im_start|>"),
    _c("im_end"),
]

CORPUS: list[Case] = DEV + HELD_OUT


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


class Score(NamedTuple):
    lines: int
    labelled: int
    extracted: int
    matched: int
    missed: list[tuple[str, str]]
    """(line, labelled fact) pairs the extractor did not return."""
    spurious: list[tuple[str, str]]
    """(line, extracted fact) pairs no label asked for."""

    @property
    def precision(self) -> float:
        return self.matched / self.extracted if self.extracted else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.labelled if self.labelled else 1.0


def score(cases: Iterable[Case], extract: Callable[[str], Iterable[str]]) -> Score:
    """Precision and recall of ``extract`` (a line -> fact texts) over ``cases``, by the rule above."""
    lines = labelled = extracted = matched = 0
    missed: list[tuple[str, str]] = []
    spurious: list[tuple[str, str]] = []
    for text, facts in cases:
        lines += 1
        want = {_key(f): f for f in facts}
        got = {_key(f): f for f in extract(text)}
        labelled += len(want)
        extracted += len(got)
        matched += len(want.keys() & got.keys())
        missed += [(text, want[k]) for k in want.keys() - got.keys()]
        spurious += [(text, got[k]) for k in got.keys() - want.keys()]
    return Score(lines, labelled, extracted, matched, missed, spurious)
