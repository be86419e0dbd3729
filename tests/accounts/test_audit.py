import pytest
from django.db import transaction

from accounts.models import AuditEvent
from accounts.services import Actor, audit_record


@pytest.mark.django_db(transaction=True)
def test_audit_record_refuses_to_run_outside_a_transaction(admin_user):
    with pytest.raises(RuntimeError, match="inside the transaction"):
        audit_record(actor=Actor(user=admin_user), verb="x.y", target=admin_user)
    assert AuditEvent.objects.count() == 0


@pytest.mark.django_db
def test_audit_events_are_append_only(admin_user):
    with transaction.atomic():
        event = audit_record(actor=Actor(user=admin_user), verb="user.touch", target=admin_user, after={"a": 1})
    assert event.actor_label == "ada"
    event.verb = "changed"
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.all().delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.update(verb="x")
    assert AuditEvent.objects.get().verb == "user.touch"
