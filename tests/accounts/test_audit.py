import pytest
from django.db import transaction

from accounts.models import AuditEvent
from accounts.services import Actor, audit_batch, audit_record


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


@pytest.mark.django_db(transaction=True)
def test_a_batch_writes_its_events_in_one_insert_in_order_and_none_when_it_fails(admin_user, django_assert_num_queries):
    actor = Actor(user=admin_user)
    with transaction.atomic():
        with django_assert_num_queries(1), audit_batch():
            first = audit_record(actor=actor, verb="a.one", target=admin_user, after={"n": 1})
            audit_record(actor=actor, verb="a.two", target=("x.thing", "7"), before={"n": 1})
            assert first.pk is None  # written at the batch's end
        assert first.pk is not None
    rows = list(AuditEvent.objects.order_by("id").values_list("verb", "target_type", "target_id", "before", "after"))
    assert rows == [
        ("a.one", "accounts.user", str(admin_user.pk), None, {"n": 1}),
        ("a.two", "x.thing", "7", {"n": 1}, None),
    ]
    with pytest.raises(ValueError), transaction.atomic(), audit_batch():
        audit_record(actor=actor, verb="a.three", target=admin_user)
        raise ValueError("the change failed")
    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_an_event_in_a_savepoint_inside_a_batch_is_rolled_back_with_it(admin_user):
    actor = Actor(user=admin_user)
    with transaction.atomic(), audit_batch():
        audit_record(actor=actor, verb="a.kept", target=admin_user)
        try:
            with transaction.atomic():
                audit_record(actor=actor, verb="a.undone", target=admin_user)
                raise ValueError("the nested change failed")
        except ValueError:
            pass
    assert list(AuditEvent.objects.values_list("verb", flat=True)) == ["a.kept"]


def test_a_batch_refuses_to_run_outside_a_transaction():
    with pytest.raises(RuntimeError, match="inside the transaction"), audit_batch():
        pass
