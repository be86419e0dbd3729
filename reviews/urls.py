from django.urls import path

from . import views

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
]
