from django.apps import AppConfig


class UpliftConfig(AppConfig):
    name = "uplift"
    verbose_name = "Certified uplift"
