from django.urls import path

from . import views
from .taxonomy import views as taxonomy_views
from .windows import views as window_views

app_name = "intents"
urlpatterns = [
    path("", views.list_view, name="list"),
    path("runs/<int:run_id>/", views.run_view, name="run"),
    path("runs/<int:run_id>/cancel/", views.cancel_view, name="cancel"),
    path("candidates/", views.candidates_view, name="candidates"),
    path("taxonomy/", taxonomy_views.taxonomy_view, name="taxonomy"),
    path("taxonomy/draft/", taxonomy_views.draft_view, name="taxonomy_draft"),
    path("taxonomy/review/", taxonomy_views.review_queue_view, name="taxonomy_queue"),
    path("taxonomy/review/<int:pk>/judge/", taxonomy_views.judge_view, name="taxonomy_judge"),
    path("windows/", window_views.windows_view, name="windows"),
    path("windows/<int:analysis_id>/", window_views.window_view, name="window"),
    path("windows/drift/", window_views.compare_view, name="window_compare"),
    path("windows/drift/<int:report_id>/", window_views.drift_view, name="drift"),
    path("windows/alerts/", window_views.alerts_view, name="window_alerts"),
    path("windows/alerts/<int:alert_id>/decide/", window_views.alert_decide_view, name="window_alert_decide"),
]
