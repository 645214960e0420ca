"""The store: one database, the repositories over it."""

from __future__ import annotations

import random
from contextlib import AbstractContextManager

from herder.clock import Clock, SystemClock
from herder.domain.jobs import DEFAULT_MAX_CHECKPOINT_MB
from herder.keyring import Keyring
from herder.store.access import AccessRepository
from herder.store.alerts.channel_secrets import ChannelSecrets
from herder.store.alerts.channels import ChannelRepository
from herder.store.alerts.deliveries import DeliveryRepository
from herder.store.alerts.history import AlertHistoryRepository
from herder.store.alerts.messages import MessageRepository
from herder.store.alerts.notices import NoticeRepository
from herder.store.alerts.rules import RuleRepository
from herder.store.artifacts import ArtifactRepository
from herder.store.audit import AuditRepository
from herder.store.backfills import BackfillRepository
from herder.store.checkpoints import CheckpointRepository
from herder.store.cold.blobs import BlobStore
from herder.store.cold.tier import ColdTier
from herder.store.database import Database
from herder.store.events import EventRepository
from herder.store.fleet import FleetRepository
from herder.store.forecast import ForecastRepository
from herder.store.history.retention import HistoryRetention
from herder.store.hooks import HookRepository
from herder.store.jobs import JobRepository
from herder.store.keys import KeyRepository
from herder.store.leases import LeaseRepository
from herder.store.limits import LimitRepository
from herder.store.log_compaction import LogCompactionRepository
from herder.store.logs import LogRepository
from herder.store.moves.guard import hold_at_home
from herder.store.moves.repository import TenantMoves
from herder.store.pools import PoolRepository
from herder.store.runs.attempts import AttemptRepository
from herder.store.runs.hand_off import HandOffRepository
from herder.store.runs.placement import PlacementRepository
from herder.store.runs.queue import QueueRepository
from herder.store.runs.repository import RunRepository
from herder.store.schedules import ScheduleRepository
from herder.store.secrets import SecretRepository
from herder.store.submit_buckets import SubmitBucketRepository
from herder.store.triggers import TriggerRepository
from herder.store.usage import UsageRepository
from herder.store.users import UserRepository
from herder.store.work import Work, unit_of_work
from herder.store.workers import WorkerRepository
from herder.store.workflows.definitions import WorkflowRepository
from herder.store.workflows.runs import WorkflowRunRepository


class Store:
    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        pool_size: int = 10,
        keyring: Keyring | None = None,
        cold: ColdTier | None = None,
        checkpoint_blobs: BlobStore | None = None,
        artifact_blobs: BlobStore | None = None,
        max_checkpoint_mb: int = DEFAULT_MAX_CHECKPOINT_MB,
        image_registries: tuple[str, ...] = (),
    ) -> None:
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.database = Database(url, pool_size=pool_size)
        self.access = AccessRepository(self.database, self.clock)
        self.keys = KeyRepository(self.database, self.clock, self.access.forget_key)
        self.users = UserRepository(self.database, self.clock)  # signed-in people, sessions
        self.audit = AuditRepository(self.database, self.clock)
        self.artifacts = ArtifactRepository(self.database, self.clock, artifact_blobs)
        self.checkpoints = CheckpointRepository(self.database, self.clock, checkpoint_blobs)
        self.secrets = SecretRepository(self.database, self.clock, keyring)
        self.jobs = JobRepository(
            self.database, self.clock, self.secrets, max_checkpoint_mb, image_registries
        )
        self.runs = RunRepository(self.database, self.clock, cold)
        self.workers = WorkerRepository(self.database, self.clock, self.rng, self.secrets)
        self.logs = LogRepository(self.database, self.clock, cold)
        self.log_compaction = LogCompactionRepository(self.database, self.clock)
        self.attempts = AttemptRepository()
        self.leases = LeaseRepository(self.database, self.clock)
        self.schedules = ScheduleRepository(self.database, self.clock, self.rng, self.jobs)
        self.fleet = FleetRepository(self.database, self.clock)
        self.pools = PoolRepository(self.database, self.clock)
        self.limits = LimitRepository(self.database, self.clock)
        self.triggers = TriggerRepository(self.database, self.clock)
        self.hooks = HookRepository(self.database, self.clock, keyring)
        self.events = EventRepository(self.database, self.clock)
        self.queue = QueueRepository(self.database, self.clock)
        self.placement = PlacementRepository(self.database, self.clock)
        self.hand_offs = HandOffRepository(self.database)
        self.workflows = WorkflowRepository(self.database, self.clock)
        self.workflow_runs = WorkflowRunRepository(self.database)
        self.backfills = BackfillRepository(self.database)
        self.channel_secrets = ChannelSecrets(self.database, keyring)
        self.alert_channels = ChannelRepository(self.database, self.clock, self.channel_secrets)
        self.alert_rules = RuleRepository(self.database, self.clock)
        self.job_notices = NoticeRepository(self.database, self.clock, self.channel_secrets)
        self.alert_history = AlertHistoryRepository(self.database)
        self.alert_deliveries = DeliveryRepository(
            self.database, self.clock, self.rng, self.channel_secrets
        )
        self.alert_messages = MessageRepository(
            self.database, self.clock, self.rng, self.channel_secrets
        )
        self.submit_buckets = SubmitBucketRepository(self.database)
        self.usage = UsageRepository(self.database, self.clock)
        self.history = HistoryRetention(self.database, self.clock, cold)
        self.forecast = ForecastRepository(self.database, self.clock)
        self.database.guard_writes(hold_at_home)
        self.moves = TenantMoves(
            self.database,
            keyring,
            self.artifacts,
            artifact_blobs,
            self.access.forget_tenant,
        )

    def work(self) -> AbstractContextManager[Work]:
        """A unit of work: one transaction, one ``now``, notices sent after commit."""
        return unit_of_work(self.database, self.clock, self.rng)

    def migrate(self) -> None:
        self.database.migrate()

    def close(self) -> None:
        self.database.dispose()
