"""The archive as the settings name it: the store, the spool beside the database, the shipper."""

from __future__ import annotations

from sqlalchemy import Engine

from scheduler.archive.archiver import ArchivePace, Archiver, Picture
from scheduler.clock import Clock
from scheduler.settings import Settings
from storage.objects.open import open_store
from storage.objects.shipper import Shipper
from storage.objects.spool import Spool


def open_archive(
    settings: Settings, engine: Engine, clock: Clock, *, picture: Picture | None = None
) -> Archiver:
    """The archiver for `settings`' store (PAIKA_OBJECT_STORE, else <data_dir>/objects), with
    its spool under <data_dir>/spool. Opening asks nothing of the network."""
    store = open_store(
        settings.object_store_spec(),
        endpoint_url=settings.s3_endpoint_url,
        region=settings.s3_region,
        addressing_style=settings.s3_addressing_style,
        signature_version=settings.s3_signature_version,
    )
    spool = Spool(settings.data_dir / "spool", settings.spool_max_mb * 2**20)
    shipper = Shipper(store, spool, clock.now)
    pace = ArchivePace(down_alert_seconds=settings.store_down_alert_minutes * 60)
    return Archiver(engine, spool, shipper, pace=pace, picture=picture)
