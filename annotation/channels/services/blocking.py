"""Block and unblock on every channel: the one door the core's worker actions use
(``annotation.services.quality``), so the core knows no channel by name.

Each channel keeps a blocked worker out where it recruits: MTurk with its block-list qualification
(``mturk_task``), Prolific with the campaign's exclusion group (``prolific``). Both run in the caller's
transaction and send their calls after commit (Celery), so a rolled-back block sends nothing.
"""

from annotation.channels.services.mturk_task import mturk_worker_block, mturk_worker_unblock
from annotation.channels.services.prolific import prolific_standing_push
from annotation.models import Worker


def worker_block_on_channels(*, campaign_id: int, worker: Worker) -> None:
    mturk_worker_block(campaign_id=campaign_id, worker=worker)
    prolific_standing_push(campaign_id=campaign_id, worker=worker)


def worker_unblock_on_channels(*, campaign_id: int, worker: Worker) -> None:
    mturk_worker_unblock(campaign_id=campaign_id, worker=worker)
    prolific_standing_push(campaign_id=campaign_id, worker=worker)
