"""The authentication backend: Django's ModelBackend, with the session's user served by accounts.session_users."""

from django.contrib.auth.backends import ModelBackend

from . import session_users


class SessionUserBackend(ModelBackend):
    def get_user(self, user_id):
        return session_users.get(user_id, super().get_user)
