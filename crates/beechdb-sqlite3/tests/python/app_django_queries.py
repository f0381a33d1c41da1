"""Django's query layer on models made with the schema editor: bulk_create, F and Q
expressions, an update through F, date extraction and truncation (Django's registered
functions), a correlated Subquery, a Window, JSON lookups, string functions, Coalesce,
aggregates, a duplicate refused, a cascade, constraints introspected. Prints what it sees;
run under SQLite's library and under BeechDB's, the two outputs must be equal.

    python3 app_django_queries.py PATH
"""
import sys, os, datetime
import django
from django.conf import settings
path = sys.argv[1]
if os.path.exists(path): os.remove(path)
settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": path}},
    INSTALLED_APPS=[], USE_TZ=False, DEFAULT_AUTO_FIELD="django.db.models.AutoField")
django.setup()
from django.db import models, connection, transaction
from django.db.models import F, Q, Count, Sum, Avg, Max, OuterRef, Subquery, Window, Value
from django.db.models.functions import Lower, Upper, ExtractYear, TruncMonth, Coalesce, Rank, Length, Concat

class Author(models.Model):
    name = models.CharField(max_length=50, unique=True)
    born = models.DateField()
    meta = models.JSONField(default=dict)
    class Meta: app_label = "lib"

class Book(models.Model):
    title = models.CharField(max_length=100)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    pages = models.IntegerField(default=0)
    published = models.DateTimeField()
    price = models.DecimalField(max_digits=8, decimal_places=2, null=True)
    class Meta: app_label = "lib"

with connection.schema_editor() as ed:
    ed.create_model(Author); ed.create_model(Book)
authors = Author.objects.bulk_create([Author(name=f"A{i}", born=datetime.date(1950 + i, 1 + i % 12, 1), meta={"n": i, "tags": ["x", "y"][: i % 3]}) for i in range(6)])
Book.objects.bulk_create([Book(title=f"Book {j} of {a.name}", author=a, pages=100 + 10 * j + a.id, published=datetime.datetime(2000 + j, 1 + a.id % 12, 5, 10, 30), price=None if j == 2 else j * 3.5) for a in Author.objects.all() for j in range(a.id % 4)])
print("counts", Author.objects.count(), Book.objects.count())
print("annot", list(Book.objects.values("author__name").annotate(n=Count("id"), p=Sum("pages")).order_by("author__name").values_list("author__name", "n", "p")))
print("filter", list(Book.objects.filter(Q(pages__gt=120) | Q(title__icontains="book 0")).order_by("id").values_list("id", flat=True)))
Book.objects.filter(pages__lt=115).update(pages=F("pages") + 1000)
print("F", list(Book.objects.order_by("-pages").values_list("pages", flat=True)[:3]))
print("year", list(Book.objects.annotate(y=ExtractYear("published")).values("y").annotate(c=Count("id")).order_by("y")))
print("month", list(Book.objects.annotate(m=TruncMonth("published")).values_list("m", flat=True).distinct().order_by("m"))[:3])
newest = Book.objects.filter(author=OuterRef("pk")).order_by("-published")
print("subq", list(Author.objects.annotate(latest=Subquery(newest.values("title")[:1])).order_by("id").values_list("latest", flat=True)))
print("window", list(Book.objects.annotate(r=Window(expression=Rank(), partition_by=[F("author")], order_by=F("pages").desc())).order_by("author_id", "r").values_list("author_id", "r")[:6]))
print("json", list(Author.objects.filter(meta__n__gte=3).values_list("name", flat=True)), list(Author.objects.filter(meta__tags__contains=["x"]).values_list("name", flat=True)) if connection.features.supports_json_field_contains else "nocontains")
print("funcs", list(Author.objects.annotate(l=Lower("name"), c=Concat("name", Value("-"), "name"), n=Length("name")).values_list("l", "c", "n")[:2]))
print("coalesce", list(Book.objects.annotate(p=Coalesce("price", Value(0), output_field=models.DecimalField())).order_by("id").values_list("p", flat=True)[:4]))
print("avg", Book.objects.aggregate(a=Avg("pages"), m=Max("price")))
try:
    with transaction.atomic():
        Author.objects.create(name="A1", born=datetime.date(2000, 1, 1))
except Exception as e:
    print("dup", type(e).__name__)
Author.objects.filter(name="A3").delete()
print("cascade", Book.objects.count())
with connection.cursor() as c:
    print("constraints", sorted(connection.introspection.get_constraints(c, "lib_book")))
