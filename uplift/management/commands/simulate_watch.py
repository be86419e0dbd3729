"""manage.py simulate_watch: the watch after activation calibrated by simulation (issue 27, item 5).

Synthetic artifacts with known true effects get a certificate from held-out paired tasks, then live traffic through
the real canary assignment and the real watch, up to a horizon fixed in advance (the first --max-canary-runs canary
runs) on which the realized live uplift is measured; the command prints the coverage of the certificates' intervals, the
false rollback rate, the missed-regression rate, the runs it takes to roll back a 10-point regression and what
happened to each class of artifact, each figure with its aim (uplift/core/simulation.py has the model). The defaults
are the full size recorded in docs/benchmarks.md; a seed gives the same figures on every machine. Touches no
database."""

from __future__ import annotations

import csv
import time

from django.core.management.base import BaseCommand, CommandError

from uplift.core.simulation import METRICS, Settings, simulate

DEFAULTS = Settings()


class Command(BaseCommand):
    help = "Simulate certificates and canary watches of synthetic artifacts with known effects; print calibration."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--artifacts", type=int, default=DEFAULTS.artifacts, help="synthetic artifacts")
        parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
        parser.add_argument("--canary-share", type=float, default=DEFAULTS.canary_share)
        parser.add_argument("--max-canary-runs", type=int, default=DEFAULTS.max_canary_runs)
        parser.add_argument("--alpha", type=float, default=DEFAULTS.alpha, help="the watch's error level")
        parser.add_argument("--held-out", type=int, default=DEFAULTS.held_out, help="paired tasks per certificate")
        parser.add_argument(
            "--certificate-alpha", type=float, default=DEFAULTS.certificate_alpha, help="0.10: 90%% intervals"
        )
        parser.add_argument("--look-every", type=int, default=DEFAULTS.look_every, help="canary runs between looks")
        parser.add_argument("--csv", default="", help="also write one row per artifact to this file")

    def handle(self, *args, **options) -> None:
        try:
            settings = Settings(
                artifacts=options["artifacts"],
                seed=options["seed"],
                canary_share=options["canary_share"],
                max_canary_runs=options["max_canary_runs"],
                alpha=options["alpha"],
                held_out=options["held_out"],
                certificate_alpha=options["certificate_alpha"],
                look_every=options["look_every"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        started = time.perf_counter()
        report = simulate(settings)
        for line in report.lines():
            self.stdout.write(line)
        self.stdout.write(f"elapsed: {time.perf_counter() - started:.1f} s")
        if options["csv"]:
            self._csv(options["csv"], report)

    def _csv(self, path: str, report) -> None:
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                ["index", "class", "points", "base", "score_effect", "certified", "action", "canary_runs",
                 "control_runs", "horizon_control_runs"]
                + [f"{metric}_{what}" for metric in METRICS
                   for what in ("cert_mean", "cert_low", "cert_high", "horizon", "at_stop")]
            )  # fmt: skip
            for r in report.results:
                a = r.artifact
                row = [a.index, a.kind, a.points, f"{a.base:.4f}", f"{a.score_effect:.5f}", int(r.certified), r.action]
                row += [r.canary_runs, r.control_runs, r.horizon_control_runs]
                for metric in METRICS:
                    row += [f"{value:.5f}" for value in (*r.certificate[metric], r.horizon[metric], r.at_stop[metric])]
                writer.writerow(row)
