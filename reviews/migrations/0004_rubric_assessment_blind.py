"""Rubric assessments record whether they were made blind (issue 24): model judges' are (their prompt never holds
another rater's score); people's made before this migration are unknown (null), since their run page showed the
others' scores then, and agreement leaves them out."""

from django.db import migrations, models


def judges_are_blind(apps, schema_editor):
    Assessment = apps.get_model("reviews", "RubricAssessmentRow")
    Assessment.objects.filter(rater_kind="model").update(blind=True)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0003_activation_history")]

    operations = [
        migrations.AddField(
            model_name="rubricassessmentrow",
            name="blind",
            field=models.BooleanField(null=True),
        ),
        migrations.RunPython(judges_are_blind, migrations.RunPython.noop),
    ]
