"""Process settings from the environment (prefix `PAIKA_`), built once at the entry point."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

BUNDLED_POLICY = Path(__file__).parent / "examples" / "policy.yml"


class Settings(BaseSettings):
    """Where paika keeps its state and who may administer it."""

    model_config = SettingsConfigDict(env_prefix="PAIKA_", extra="ignore")

    data_dir: Path = Path("paika-data")
    database_url: str | None = None
    config: Path | None = None
    # Comma-separated Slack user ids that are admins from the first start, so a new
    # install can be bootstrapped without touching SQL.
    admins: Annotated[tuple[str, ...], NoDecode] = ()
    # The shared bearer token, for hosts without a token of their own (see hosts/credentials.py).
    agent_token: str | None = None
    # The secret each host's own token is derived from (0600; `paika agent-secret` makes it).
    # Unset: hosts are added without a token of their own and use agent_token.
    agent_secret_file: Path | None = None
    # The CA bundle https:// agents' certificates are checked against (default: the system's).
    agent_ca_file: Path | None = None

    # Slack, under Slack's own variable names (no PAIKA_ prefix). With no bot token paika
    # runs without Slack and reports to the console.
    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_BOT_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_SIGNING_SECRET")
    )
    # Set: Socket Mode (no public URL needed). Unset: HTTP mode on http_host:http_port.
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_APP_TOKEN")
    )
    # Another base URL for Slack's Web API (a proxy, or a local fake in tests).
    slack_api_url: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=3000, ge=0, le=65535)
    # Seconds a client of paika up's HTTP side (Slack in HTTP mode, /metrics, /healthz, jobs'
    # reports) has to send its request line and headers; a slower one gets 408 and is closed.
    http_head_timeout_s: float = Field(default=10.0, gt=0)
    # Seconds a client has to send a request's body once its headers are in, or is closed.
    http_body_timeout_s: float = Field(default=30.0, gt=0)
    # Open connections at most on the HTTP side (unset: 1000, or fewer to stay 256 under the
    # limit on open files). At the cap the longest-idle one is closed to make room; with
    # every one busy with a request, a new one gets 503.
    http_max_connections: int | None = Field(default=None, ge=1)
    # Where a running job reports its outputs (`paika report` inside it POSTs to
    # <report_url>/v1/jobs/<id>/report): the address of paika up as the GPU hosts reach it.
    # Unset: http://<http_host>:<http_port>.
    report_url: str | None = None
    # text, or json: one JSON object a line (scheduler/agent/observe.py); level by name.
    log_format: str = "text"
    log_level: str = "INFO"

    # The team's memory (storage/objects/): s3://bucket/prefix, or a folder (default
    # <data_dir>/objects). The S3 settings name the service's dialect; credentials come only
    # from boto3's own chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...), never from here.
    object_store: str | None = None
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_addressing_style: Literal["path", "virtual", "auto"] | None = None
    s3_signature_version: str | None = None
    # Writes wait on local disk while the store is down, up to this size; then the oldest
    # snapshots go first (never a config version or a log line).
    spool_max_mb: int = Field(default=256, ge=1)
    # The admins' channel hears once when the store has been down this long, and again on recovery.
    store_down_alert_minutes: float = Field(default=10, gt=0)
    # Reports one run of a job may send to paika up's endpoint in any minute; one more is
    # answered 429 with Retry-After.
    report_rate_per_minute: int = Field(default=60, ge=1)
    # Rows one run's reports may store (endpoint and report file together); past it the
    # oldest are kept, its verdict always, and its latest metrics and output still set.
    report_rows_per_run: int = Field(default=10_000, ge=1)

    @field_validator("admins", mode="before")
    @classmethod
    def _split_admins(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL; by default a SQLite file under the data folder."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'paika.db').as_posix()}"

    def object_store_spec(self) -> str:
        """Where the team's memory lives: `PAIKA_OBJECT_STORE`, else <data_dir>/objects."""
        if self.object_store:
            return self.object_store
        return (self.data_dir / "objects").as_posix()

    def resolved_report_url(self) -> str:
        """Where jobs report their outputs: PAIKA_REPORT_URL, else paika up's own address."""
        if self.report_url:
            return self.report_url.rstrip("/")
        return f"http://{self.http_host}:{self.http_port}"

    def policy_path(self) -> Path:
        """The policy file in force: `PAIKA_CONFIG`, else the bundled example."""
        return self.config if self.config is not None else BUNDLED_POLICY
