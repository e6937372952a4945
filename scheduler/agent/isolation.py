"""How a job is kept apart from the agent and from other jobs: its account and its cgroup.

Accounts. An agent running as root starts each job as its owner's account (uid, primary gid and the
groups initgroups would give) and never as root, unless it was started with
--allow-root-jobs (single-user boxes, test rigs). An agent running as any other user can
only run jobs as that user: it has no right to become anyone else, and says so.

Nor does a root agent run a job as an account that is as good as root or as the system's:
a system account (uid 1-999: daemons own files and services under those) unless started
with --allow-system-accounts, or a member of a privileged group (docker, wheel, sudo, adm,
root, lxd, libvirt, disk: each hands its members root, the logs or the raw disks) unless
that group was named with --allow-group. The scheduler maps people to accounts by name and
cannot see a host's /etc/passwd; the agent can, so it is the agent that refuses (403, the
reason saying what to do). A container job drops every capability and takes no new
privileges; `container_caps` are those the site adds back (--container-cap-add).

The job's working directory must be one the account can write to; that is checked from the
directory's mode bits and owners before the launch (the wrapper changes into it again as the
account, so the kernel has the last word), so a bad one is refused with a reason instead of
a job that dies at once.

Cgroups. The agent makes `<its own cgroup>/paika/<state-dir tag>/` once at start; each job's process
joins `<that>/<job id>` before it execs (the wrapper makes the directory; see wrapper.py).
A job's stragglers, even those that left its process group, are then found and killed
through `cgroup.kill`, and the directory goes when the job ends. The tag (the state
dir's device and inode) keeps two agents on one host (tests, simulations) apart.

Where there is no cgroup v2 mount, or the agent may not write under its own cgroup (no
delegation), jobs run without one: one info line at start says so.
"""

from __future__ import annotations

import contextlib
import grp
import logging
import os
import pwd
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from scheduler.agent.errors import AccountRefused, BadRequest

log = logging.getLogger(__name__)

# What a job finds in PATH: the system's directories, nothing of the agent's own.
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
JOB_UMASK = 0o022
MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUP = Path("/proc/self/cgroup")
# Groups whose members are as good as root (docker, lxd, libvirt, wheel, sudo, root) or read
# what only root should (adm: the system's logs; disk: the raw disks).
PRIVILEGED_GROUPS = ("docker", "wheel", "sudo", "adm", "root", "lxd", "libvirt", "disk")
# Accounts under this uid are the system's own (Debian, Fedora and SUSE agree: login.defs),
# and so is nobody (the kernel's overflow uid, owner of every file it cannot map).
FIRST_PERSON_UID = 1000
NOBODY_UID = 65534
CAPABILITY_RE = re.compile(r"(CAP_)?[A-Z][A-Z0-9_]{1,31}")


@dataclass(frozen=True)
class Account:
    """A Unix user as a job runs: ids, groups, and what its login would set."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str

    @classmethod
    def from_passwd(cls, entry: pwd.struct_passwd) -> Account:
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
        return cls(
            name=entry.pw_name,
            uid=entry.pw_uid,
            gid=entry.pw_gid,
            groups=tuple(sorted(set(groups))),
            home=entry.pw_dir or "/",
            shell=entry.pw_shell or "/bin/sh",
        )

    @classmethod
    def current(cls) -> Account:
        """The user this process runs as (also when the passwd database does not list it)."""
        uid = os.geteuid()
        try:
            return cls.from_passwd(pwd.getpwuid(uid))
        except KeyError:
            return cls(
                name=os.environ.get("USER") or str(uid),
                uid=uid,
                gid=os.getegid(),
                groups=tuple(sorted(set(os.getgroups()))),
                home=os.environ.get("HOME") or "/",
                shell="/bin/sh",
            )

    def login_env(self) -> dict[str, str]:
        """PATH, HOME, USER, LOGNAME and SHELL as a login of this account would set them."""
        return {
            "PATH": JOB_PATH,
            "HOME": self.home,
            "USER": self.name,
            "LOGNAME": self.name,
            "SHELL": self.shell,
        }

    def default_workdir(self) -> str:
        """The account's home, or / when it has none on this host (as login does)."""
        return self.home if Path(self.home).is_dir() else "/"


def capability_name(value: str) -> str:
    """A Linux capability as `--cap-add` takes it (SYS_PTRACE or CAP_SYS_PTRACE, any case);
    ValueError saying what is wrong."""
    name = value.strip().upper()
    if not CAPABILITY_RE.fullmatch(name) or name.removeprefix("CAP_") == "ALL":
        raise ValueError(
            f"{value!r} is not one Linux capability (such as SYS_PTRACE or IPC_LOCK; ALL is "
            "not taken: name each one a job needs)"
        )
    return name


@dataclass(frozen=True)
class RunAs:
    """The rules for the accounts this agent runs jobs as, and what a container job keeps."""

    agent: Account
    allow_root_jobs: bool = False
    # Let a root agent run jobs as system accounts (uid 1-999).
    allow_system_accounts: bool = False
    # Privileged groups a root agent still runs their members' jobs for.
    allowed_groups: frozenset[str] = frozenset()
    privileged_groups: tuple[str, ...] = PRIVILEGED_GROUPS
    # Capabilities a container job keeps (every other one is dropped).
    container_caps: tuple[str, ...] = ()

    @classmethod
    def for_this_process(
        cls,
        *,
        allow_root_jobs: bool = False,
        allow_system_accounts: bool = False,
        allowed_groups: frozenset[str] | set[str] | tuple[str, ...] = (),
        container_caps: tuple[str, ...] | list[str] = (),
    ) -> RunAs:
        return cls(
            Account.current(),
            allow_root_jobs,
            allow_system_accounts=allow_system_accounts,
            allowed_groups=frozenset(allowed_groups),
            container_caps=tuple(capability_name(c) for c in container_caps),
        )

    @property
    def privileged(self) -> bool:
        """The agent runs as root: it can (and must) switch each job to its owner."""
        return self.agent.uid == 0

    def account_for(self, requested: str | None) -> Account:
        """The account a job asking for `requested` runs as; AccountRefused with the reason."""
        if not self.privileged:
            if requested is None or requested == self.agent.name:
                return self.agent
            raise AccountRefused(
                f"account: this agent runs as {self.agent.name!r}, not root, so it runs jobs only "
                f"as {self.agent.name!r}, not as {requested!r}; run the agent as root to run "
                "jobs as their owners"
            )
        if requested is None:
            if self.allow_root_jobs:
                return self.agent
            raise AccountRefused(
                "account: missing: this agent runs as root and does not run jobs as root; "
                "name the Unix account to run the job as (map its owner to one), or start "
                "the agent with --allow-root-jobs on a single-user host"
            )
        try:
            account = Account.from_passwd(pwd.getpwnam(requested))
        except KeyError:
            raise AccountRefused(
                f"account: there is no Unix account {requested!r} on this host; create it "
                "(useradd) or map the job's owner to an account that exists here"
            ) from None
        if account.uid == 0 and not self.allow_root_jobs:
            raise AccountRefused(
                f"account: {requested!r} is root (uid 0) and this agent does not run jobs as "
                "root; name the owner's own account, or start the agent with --allow-root-jobs"
            )
        self.check_unprivileged(account)
        return account

    def check_unprivileged(self, account: Account) -> None:
        """AccountRefused when a root agent would run a job as a system account or as a
        member of a privileged group it was not told to accept (root itself answers to
        allow_root_jobs alone)."""
        if account.uid == 0:
            return
        system = account.uid < FIRST_PERSON_UID or account.uid == NOBODY_UID
        if system and not self.allow_system_accounts:
            raise AccountRefused(
                f"account: {account.name!r} is a system account (uid {account.uid}; people's "
                f"accounts start at {FIRST_PERSON_UID}) and this agent does not run jobs as "
                "system accounts; map "
                "the job's owner to a person's own account, or start the agent with "
                "--allow-system-accounts"
            )
        held = [
            name
            for name in group_names(account.groups)
            if name in self.privileged_groups and name not in self.allowed_groups
        ]
        if held:
            names = ", ".join(held)
            options = " ".join(f"--allow-group {name}" for name in held)
            raise AccountRefused(
                f"account: {account.name!r} is in the privileged group(s) {names}, which "
                "give their members root's powers on this host, so this agent does not run "
                f"its jobs; take the account out of {names} (gpasswd -d {account.name} "
                f"<group>), map the owner to another account, or start the agent with {options}"
            )


def group_names(gids: tuple[int, ...]) -> list[str]:
    """The names of these groups on this host (a gid without a name is left out)."""
    names = []
    for gid in gids:
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


def workdir_for(account: Account, cwd: str | None) -> str:
    """The directory the job starts in: `cwd`, which must be a directory the account can
    write to (BadRequest saying why not), else the account's home."""
    if cwd is None:
        return account.default_workdir()
    path = Path(cwd)
    if not path.is_dir():
        raise BadRequest(f"cwd: {cwd} is not a directory on this host")
    if not can_write(account, path):
        raise BadRequest(
            f"cwd: {account.name!r} cannot write to {cwd} (or reach it); pick a directory the "
            f"account owns, or give it write access (chown/chmod)"
        )
    return cwd


def can_write(account: Account, directory: Path) -> bool:
    """The account may enter and write in `directory`, and reach it from /."""
    if account.uid == os.geteuid():
        return os.access(directory, os.W_OK | os.X_OK)
    if account.uid == 0:
        return True
    resolved = directory.resolve()
    for parent in reversed(resolved.parents):
        if not _allows(account, parent.stat(), stat.S_IXOTH):
            return False
    return _allows(account, resolved.stat(), stat.S_IWOTH | stat.S_IXOTH)


def _allows(account: Account, info: os.stat_result, bits: int) -> bool:
    """The permission bits (other-class values: 4 read, 2 write, 1 search) that apply to
    the account grant all of `bits`."""
    if info.st_uid == account.uid:
        granted = (info.st_mode >> 6) & 0o7
    elif info.st_gid in account.groups or info.st_gid == account.gid:
        granted = (info.st_mode >> 3) & 0o7
    else:
        granted = info.st_mode & 0o7
    return granted & bits == bits


# ---------------------------------------------------------------- cgroups


def cgroup2_mount(mountinfo: str) -> Path | None:
    """Where the cgroup2 file system is mounted, from /proc/self/mountinfo's text."""
    for line in mountinfo.splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
            return Path(fields[0].split()[4])
    return None


def own_cgroup(text: str) -> str | None:
    """This process's cgroup v2 path ('0::/…' in /proc/self/cgroup), or None."""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def jobs_cgroup_root(state_dir: Path) -> Path | None:
    """The cgroup under which this agent's jobs get one each; None (logged) where it cannot."""
    try:
        mount = cgroup2_mount(MOUNTINFO.read_text())
        own = own_cgroup(OWN_CGROUP.read_text())
    except OSError:
        mount = own = None
    if mount is None or own is None:
        log.info("no cgroup v2 on this host: jobs run without a cgroup of their own")
        return None
    # The state dir's identity on this host: two agents never share one (see agent.lock).
    info = state_dir.stat()
    root = mount / own.lstrip("/") / "paika" / f"{info.st_dev:x}-{info.st_ino:x}"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.info(
            "cannot make cgroups under %s (%s; delegate a cgroup v2 subtree to the agent for "
            "that): jobs run without a cgroup of their own",
            root.parent,
            exc.strerror or exc,
        )
        return None
    log.info("each job runs in a cgroup of its own under %s", root)
    return root


def kill_cgroup(cgroup: str) -> bool:
    """SIGKILL every process in the job's cgroup; False where there is no cgroup.kill."""
    try:
        Path(cgroup, "cgroup.kill").write_text("1")
    except OSError:
        return False
    return True


def release_cgroups(root: Path | None) -> None:
    """Remove the agent's cgroup directory once no job's is left in it."""
    if root is not None:
        with contextlib.suppress(OSError):
            root.rmdir()
