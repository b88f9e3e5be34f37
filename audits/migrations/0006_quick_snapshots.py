"""Snapshots computed from the running statistics are called quick (they were "cheap"): the kind's
choice changes, and so do the stored rows, in the ``kind`` column and in the copy of it in their
data. Help texts say "scaled value" for a label's value on the audit's scale."""

from django.db import migrations, models


def _rename_kind(old: str, new: str):
    def rename(apps, schema_editor):
        AuditSnapshot = apps.get_model("audits", "AuditSnapshot")
        rows = AuditSnapshot.objects.filter(kind=old).only("pk", "data")
        batch = []
        for snapshot in rows.iterator(chunk_size=500):
            snapshot.kind = new
            if isinstance(snapshot.data, dict) and snapshot.data.get("kind") == old:
                snapshot.data["kind"] = new
            batch.append(snapshot)
            if len(batch) == 500:
                AuditSnapshot.objects.bulk_update(batch, ["kind", "data"])
                batch = []
        AuditSnapshot.objects.bulk_update(batch, ["kind", "data"])

    return rename


class Migration(migrations.Migration):

    dependencies = [
        ("audits", "0005_verbose_names"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditsnapshot",
            name="kind",
            field=models.CharField(
                choices=[("quick", "Quick (running statistics)"), ("full", "Full (label matrix)")], max_length=5
            ),
        ),
        migrations.RunPython(_rename_kind("cheap", "quick"), _rename_kind("quick", "cheap")),
        migrations.AlterField(
            model_name="auditsnapshot",
            name="data",
            field=models.JSONField(help_text="The numbers (quick) or the engine's report dict (full)."),
        ),
        migrations.AlterField(
            model_name="auditstats",
            name="audited_labels",
            field=models.PositiveBigIntegerField(default=0, help_text="Watermark of the latest quick snapshot."),
        ),
        migrations.AlterField(
            model_name="auditstats",
            name="scale",
            field=models.JSONField(default=dict, help_text="The raw → scaled value map the statistics were built with."),
        ),
        migrations.AlterField(
            model_name="auditstatsshard",
            name="n_invalid",
            field=models.PositiveBigIntegerField(
                default=0, help_text="Raw values the binarization map leaves out (not audited)."
            ),
        ),
        migrations.AlterField(
            model_name="auditstatsshard",
            name="n_units",
            field=models.PositiveBigIntegerField(default=0, help_text="Valid scaled values (audited)."),
        ),
    ]
