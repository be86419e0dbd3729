"""OpenTelemetry trace ingest, pure: OTLP bodies decoded into span records, traces mapped onto Waymark runs."""
