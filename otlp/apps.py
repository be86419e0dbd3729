from django.apps import AppConfig


class OtlpConfig(AppConfig):
    name = "otlp"
    verbose_name = "OpenTelemetry ingest"
