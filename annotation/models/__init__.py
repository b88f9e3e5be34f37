from .campaigns import Campaign
from .labels import Label
from .leases import Lease
from .prompts import ImportBatch, Prompt, Slot
from .workers import Participation, Worker

__all__ = ["Campaign", "ImportBatch", "Label", "Lease", "Participation", "Prompt", "Slot", "Worker"]
