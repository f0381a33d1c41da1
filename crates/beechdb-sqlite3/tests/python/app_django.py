"""An application on Django's ORM (5.1): the migrations of contenttypes and auth (tables
rebuilt for ALTERs, introspection, double-quoted names read as strings), users and groups
through a many-to-many table, a duplicate refused inside atomic(), a savepoint rolled
back, constraints introspected, an annotation. Prints what it sees; run under SQLite's
library and under BeechDB's, the two outputs must be equal.

    python3 app_django.py PATH
"""
import sys, os
import django
from django.conf import settings
path = sys.argv[1]
if os.path.exists(path): os.remove(path)
settings.configure(
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": path}},
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
    USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.AutoField")
django.setup()
from django.core.management import call_command
from django.db import connection, transaction, IntegrityError
from django.contrib.auth.models import User, Group, Permission
import io
out = io.StringIO()
call_command("migrate", verbosity=1, stdout=out)
print("\n".join(l for l in out.getvalue().splitlines() if "Applying" in l or "OK" in l)[:2000])
g = Group.objects.create(name="staff")
for i in range(5):
    u = User.objects.create_user(f"user{i}", f"u{i}@x.org", "pw")
    if i % 2: u.groups.add(g)
print("users", User.objects.count(), list(User.objects.filter(groups__name="staff").values_list("username", flat=True).order_by("username")))
try:
    with transaction.atomic():
        User.objects.create_user("user1", "dup@x", "pw")
except IntegrityError as e:
    print("dup", e)
with transaction.atomic():
    User.objects.filter(username="user0").update(first_name="Zed")
    sid = transaction.savepoint()
    User.objects.filter(username="user2").delete()
    transaction.savepoint_rollback(sid)
print("after", User.objects.count(), User.objects.get(username="user0").first_name)
print("perms", Permission.objects.filter(content_type__app_label="auth").count())
with connection.cursor() as c:
    print("tables", sorted(connection.introspection.table_names(c))[:6])
    print("constraints", sorted(connection.introspection.get_constraints(c, "auth_user_groups").keys())[:5])
from django.db.models import Count
print("annot", list(Group.objects.annotate(n=Count("user")).values_list("name", "n")))
