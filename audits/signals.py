"""The live audit's signals, re-exported by ``audits.hook`` (the module annotation imports).

A module of its own, importing nothing of the app: ``audits.hook`` imports the services, and the
service that sends the signal (``audits.services.worker_rules``) must not import the hook back.
"""

from django.dispatch import Signal

#: Sent by the quick run with ``campaign`` (a ``Campaign``) and ``decisions`` (a list of
#: ``audits.selectors.worker_rules.RuleDecision``, in rule order), when the campaign's quality rules
#: call for actions on workers. A receiver returns the ``WorkerAction`` rows it wrote or found, one per
#: decision it carried out; annotation's (``annotation.services.rule_actions``) is connected in its
#: ``AppConfig.ready``. Why a signal: ``audits.services.worker_rules``.
worker_actions_due = Signal()

#: Sent by the quick run with ``campaign_id`` once its quality rules were applied (its snapshot's
#: ``rules_applied_at`` is set): the labels it read have had their chance to be judged. The Prolific
#: channel reviews then the submissions that were waiting for the audit.
rules_applied = Signal()

#: Sent by an analysis the audit stores (a clustering saved, reverted or imported), inside its
#: transaction, with ``campaign_id``, ``verb``, ``summary``, ``detail`` and ``actor``: the campaign's
#: activity log is annotation's, which records it (its receiver is connected in ``AppConfig.ready``).
#: A signal rather than an import: annotation's services import the audit's, not the other way round.
analysis_recorded = Signal()
