"""What the database can hold of each value people type: one source for the models and the
/gpu grammar, so a value that is too long is refused at the door, naming its key, instead of
failing as a generic database error on PostgreSQL or MariaDB.

Changing a length here changes a column: it needs a migration (test_schema checks).
"""

from __future__ import annotations

from datetime import date

# Lengths, in characters, of the String columns that /gpu keys write.
JOB_NAME = 64  # jobs.name
TEAM_NAME = 64  # teams.name
TEMPLATE_NAME = 64  # templates.name, jobs.template
HOST_NAME = 64  # hosts.name
GPU_TYPE = 64  # gpus.gpu_type, quotas.gpu_type, ledger_entries.gpu_type, matches.chosen_type
HOST_URL = 300  # hosts.url
LAST_ERROR = 300  # hosts.last_error (a longer reason is cut)
IMAGE = 300  # jobs.image
DATA_LOCATION = 500  # jobs.data_location
CHANNEL = 100  # teams.channel
SLACK_ID = 32  # every Slack user id column; ids are short, this leaves room for enterprise ids
PRIORITY = 8  # jobs.priority, bump_requests.from_priority / to_priority
ROLE = 16  # members.role
LANGUAGE = 8  # user_prefs.language
UNIX_ACCOUNT = 32  # unix_accounts.account, jobs.account (a POSIX user name)
PROJECT = 64  # jobs.project
ROUND = 32  # jobs.round (a number or a name: "3", "v2-warmup")
OUTPUT_NAME = 64  # job_outputs.name (a metric's name, or an artefact's label)
OUTPUT_SOURCE = 16  # job_outputs.source
CHECKPOINT = 500  # jobs.checkpoint (a path or URL where the job keeps its checkpoint)

# A preemptible job's grace between SIGTERM and the kill, in seconds (`grace=`): long enough
# to write a checkpoint, short enough that the work it makes room for is not kept waiting.
GRACE_MIN_S = 30
GRACE_MAX_S = 2 * 3600

# Integer primary keys are 32-bit on PostgreSQL and MariaDB; a larger number in a query is
# an "integer out of range" error there, so record numbers above this are refused.
ROW_ID_MAX = 2**31 - 1

# The dates paika takes. Dates far out (9999-12-31) overflow datetime arithmetic (a
# reminder 14 days ahead, a time zone's offset) and dates near year 1 underflow it; no quota
# or report needs anything outside this window.
EARLIEST_DATE = date(2000, 1, 1)
LATEST_DATE = date(2199, 12, 31)
