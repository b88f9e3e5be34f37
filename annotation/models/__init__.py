from .campaigns import Campaign
from .collaboration import Activity, Collaboration
from .invitations import Invitation
from .labels import Label
from .leases import Lease
from .prompts import ImportBatch, Prompt, Slot
from .stop_decisions import StopDecision
from .worker_actions import QualityRule, WorkerAction
from .workers import Participation, Worker

__all__ = [
    "Activity",
    "Collaboration",
    "Campaign",
    "ImportBatch",
    "Invitation",
    "Label",
    "Lease",
    "Participation",
    "Prompt",
    "QualityRule",
    "Slot",
    "StopDecision",
    "Worker",
    "WorkerAction",
]
