from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"
