from django.urls import path

from . import rubric_views, views

app_name = "reviews"
urlpatterns = [
    path("", views.queue_view, name="queue"),
    path("next/", views.next_view, name="next"),
    path("propose/", views.propose_view, name="propose"),
    path("rollback/", views.rollback_view, name="rollback"),
    path("<int:pk>/", views.item_view, name="item"),
    path("<int:pk>/judge/", views.judge_view, name="judge"),
    path("<int:pk>/override/", views.override_view, name="override"),
    path("<int:pk>/withdraw/", views.withdraw_view, name="withdraw"),
    path("history/<str:kind>/<path:parent_key>/", views.history_view, name="history"),
    path("webhooks/", views.webhooks_view, name="webhooks"),
    path("webhooks/<int:pk>/toggle/", views.webhook_toggle_view, name="webhook_toggle"),
    path("webhooks/deliveries/", views.deliveries_view, name="deliveries"),
    path("rubrics/", rubric_views.list_view, name="rubrics"),
    path("rubrics/<int:pk>/", rubric_views.detail_view, name="rubric"),
    path("rubrics/<int:pk>/agreement/", rubric_views.agreement_view, name="rubric_agreement"),
    path("rubrics/runs/<int:run_id>/", rubric_views.panel_view, name="rubric_panel"),
    path("rubrics/runs/<int:run_id>/assess/", rubric_views.assess_view, name="rubric_assess"),
    path("rubrics/runs/<int:run_id>/judge/", rubric_views.judge_view, name="rubric_judge"),
]
