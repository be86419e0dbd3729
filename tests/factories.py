"""factory-boy factories shared by every test folder. App-specific factories live beside their tests."""

import factory
from django.contrib.auth.models import Group

from accounts.models import User
from accounts.roles import Role


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.test")
    password = factory.django.Password("correct horse battery staple")

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        if not create or not extracted:
            return
        for role in extracted:
            group, _ = Group.objects.get_or_create(name=str(role))
            self.groups.add(group)


def user_with(*roles: Role, **kwargs) -> User:
    return UserFactory(roles=list(roles), **kwargs)
