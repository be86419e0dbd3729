"""manage.py recertify --kind K --candidate ID [--model M]: certify a candidate again on fresh runs (as the system
actor), e.g. an active procedure version flagged "not certified for <model>"; `--check` runs the model-coverage check
first and lists the flags."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from uplift import selectors, services


class Command(BaseCommand):
    help = "Start a candidate's paired evaluation again on fresh runs (of one agent model, when given)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--kind", help="the promotable kind, e.g. procedure_version or graph_revision")
        parser.add_argument("--candidate", help="the candidate's id, as promotion requests name it")
        parser.add_argument("--model", default="", help="only fresh runs of this agent model")
        parser.add_argument("--check", action="store_true", help="run the model-coverage check and list the flags")

    def handle(self, *args, kind=None, candidate=None, model="", check=False, **options) -> None:
        if check:
            counts = services.coverage_check()
            self.stdout.write(f"checked {counts['checked']}, flagged {counts['flagged']}, cleared {counts['cleared']}")
            for flag in selectors.coverage_flags():
                self.stdout.write(
                    f"{flag.kind} {flag.candidate_id} ({flag.parent_label} {flag.label}): not certified for "
                    f"{flag.model} ({flag.share:.0%} of {flag.runs} runs)"
                )
        if kind is None and candidate is None:
            if not check:
                raise CommandError("give --kind and --candidate (or --check)")
            return
        if not kind or not candidate:
            raise CommandError("give both --kind and --candidate")
        try:
            started = services.recertification_start(
                actor=services.Actor.system(), kind=kind, candidate_id=candidate, model=model
            )
        except services.UpliftInvalid as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"started: {started}")
