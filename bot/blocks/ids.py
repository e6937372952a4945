"""Every action_id, block_id and callback_id the bot's Block Kit uses.

The listeners match on these and the manifest test reads them, so a renamed id breaks
a test instead of a button.
"""

from __future__ import annotations

from types import MappingProxyType

# The approval message posted to approvers: its buttons carry the bump request id as value.
BUMP_ACTIONS = "bump_actions"
BUMP_APPROVE = "bump_approve"
BUMP_DENY = "bump_deny"

# The App Home tab.
HOME_ACTIONS = "home_actions"
HOME_REFRESH = "home_refresh"
HOME_SUBMIT = "home_submit"  # opens the submit modal

# The submit modal: one input block per field; each element's action_id is its block's id.
SUBMIT_CALLBACK = "submit_job"
SUBMIT_TEMPLATE = "submit_template"
SUBMIT_NAME = "submit_name"
SUBMIT_GPUS = "submit_gpus"
SUBMIT_TYPE = "submit_type"
SUBMIT_MEM = "submit_mem"
SUBMIT_HOURS = "submit_hours"
SUBMIT_PRIORITY = "submit_priority"
SUBMIT_DATA = "submit_data"
SUBMIT_LOCATION = "submit_location"
SUBMIT_CMD = "submit_cmd"
SUBMIT_IMAGE = "submit_image"
SUBMIT_TEAM = "submit_team"
SUBMIT_PROJECT = "submit_project"
SUBMIT_ROUND = "submit_round"
SUBMIT_PREEMPTIBLE = "submit_preemptible"
SUBMIT_GRACE = "submit_grace"
SUBMIT_CHECKPOINT = "submit_checkpoint"
SUBMIT_SHARE = "submit_share"
SUBMIT_AFTER = "submit_after"
SUBMIT_COUNT = "submit_count"
SUBMIT_SWEEP = "submit_sweep"
SUBMIT_MAX_RUNNING = "submit_max_running"

# The submit grammar's key behind each modal block (the data radio and the location box
# together make the one `data` key, so location has no key of its own).
SUBMIT_BLOCK_OF_KEY = MappingProxyType(
    {
        "template": SUBMIT_TEMPLATE,
        "name": SUBMIT_NAME,
        "gpus": SUBMIT_GPUS,
        "type": SUBMIT_TYPE,
        "mem": SUBMIT_MEM,
        "hours": SUBMIT_HOURS,
        "priority": SUBMIT_PRIORITY,
        "data": SUBMIT_DATA,
        "cmd": SUBMIT_CMD,
        "image": SUBMIT_IMAGE,
        "team": SUBMIT_TEAM,
        "project": SUBMIT_PROJECT,
        "round": SUBMIT_ROUND,
        "preemptible": SUBMIT_PREEMPTIBLE,
        "grace": SUBMIT_GRACE,
        "checkpoint": SUBMIT_CHECKPOINT,
        "share": SUBMIT_SHARE,
        "after": SUBMIT_AFTER,
        "count": SUBMIT_COUNT,
        "sweep": SUBMIT_SWEEP,
        "max_running": SUBMIT_MAX_RUNNING,
    }
)

# Alerts paika raises on its own; each button carries the alert's key as its value.
ALERT_ACTIONS = "alert_actions"
QUOTA_ACKNOWLEDGE = "quota_acknowledge"  # a quota nearing expiry or running out
IDLE_STILL_USING = "idle_still_using"  # GPUs held idle: the owner still uses them
IDLE_RELEASE = "idle_release"  # … or lets them go now
OVERRUN_EXTEND = "overrun_extend"  # a run past its estimate: the estimate grows
OVERRUN_STOP = "overrun_stop"  # … or the run is stopped (the owner's cancel)
# A job held because a job it waits for failed: each button carries the held job's id.
HELD_ACTIONS = "held_actions"
HELD_RELEASE = "held_release"  # go on without it (/gpu release)
HELD_CANCEL = "held_cancel"  # cancel the held job

# The report's page buttons (`/gpu report … page=N`): each carries the report's words.
REPORT_PAGES = "report_pages"
REPORT_PREVIOUS = "report_previous"
REPORT_NEXT = "report_next"

ACTION_IDS = (
    BUMP_APPROVE,
    BUMP_DENY,
    HOME_REFRESH,
    HOME_SUBMIT,
    QUOTA_ACKNOWLEDGE,
    IDLE_STILL_USING,
    IDLE_RELEASE,
    REPORT_PREVIOUS,
    REPORT_NEXT,
    OVERRUN_EXTEND,
    OVERRUN_STOP,
    HELD_RELEASE,
    HELD_CANCEL,
)
CALLBACK_IDS = (SUBMIT_CALLBACK,)
BLOCK_IDS = (
    BUMP_ACTIONS,
    HOME_ACTIONS,
    SUBMIT_TEMPLATE,
    SUBMIT_NAME,
    SUBMIT_GPUS,
    SUBMIT_TYPE,
    SUBMIT_MEM,
    SUBMIT_HOURS,
    SUBMIT_PRIORITY,
    SUBMIT_DATA,
    SUBMIT_LOCATION,
    SUBMIT_CMD,
    SUBMIT_IMAGE,
    SUBMIT_TEAM,
    ALERT_ACTIONS,
    HELD_ACTIONS,
    SUBMIT_PROJECT,
    SUBMIT_ROUND,
    REPORT_PAGES,
    SUBMIT_PREEMPTIBLE,
    SUBMIT_GRACE,
    SUBMIT_CHECKPOINT,
    SUBMIT_SHARE,
    SUBMIT_AFTER,
    SUBMIT_COUNT,
    SUBMIT_SWEEP,
    SUBMIT_MAX_RUNNING,
)
