"""An application on SQLAlchemy's ORM (2.0): tables created from models (SQLAlchemy first
probes for them with PRAGMA table_info), reflected back (table_xinfo, index_list,
foreign_key_list, sqlite_master), rows with relationships, a grouped join, a savepoint
rolled back, a duplicate refused, a cascade, RETURNING; then Core: CHECK, UNIQUE and
indexes reflected, JSON paths, an upsert, server defaults. Prints what it sees; run under
SQLite's library and under BeechDB's, the two outputs must be equal.

    python3 orm_sqlalchemy.py PATH
"""
import sys, os
from datetime import datetime
from sqlalchemy import create_engine, String, ForeignKey, select, func, text, inspect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, Session

class Base(DeclarativeBase): pass

class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(30), unique=True)
    created: Mapped[datetime] = mapped_column(default=lambda: datetime(2024, 1, 2, 3, 4, 5))
    addresses: Mapped[list["Address"]] = relationship(back_populates="user", cascade="all, delete-orphan")

class Address(Base):
    __tablename__ = "addresses"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    user: Mapped[User] = relationship(back_populates="addresses")

path = sys.argv[1]
if os.path.exists(path): os.remove(path)
engine = create_engine(f"sqlite:///{path}")
Base.metadata.create_all(engine)
insp = inspect(engine)
print("tables", insp.get_table_names())
print("columns", [(c["name"], str(c["type"]), c["nullable"], c["primary_key"]) for c in insp.get_columns("addresses")])
print("fks", insp.get_foreign_keys("addresses"))
print("unique", insp.get_unique_constraints("users"))
print("indexes", insp.get_indexes("users"))
with Session(engine) as s:
    s.add_all([User(name=f"u{i}", addresses=[Address(email=f"u{i}@x{j}") for j in range(i % 3)]) for i in range(10)])
    s.commit()
    print("count", s.scalar(select(func.count()).select_from(User)))
    q = select(User.name, func.count(Address.id)).join(Address, isouter=True).group_by(User.name).order_by(User.name)
    print("grouped", s.execute(q).all())
    u = s.scalars(select(User).where(User.name == "u5")).one()
    print("user", u.id, u.name, u.created, [a.email for a in u.addresses])
    nested = s.begin_nested()
    s.add(User(name="tmp"))
    s.flush()
    nested.rollback()
    print("after savepoint rollback", s.scalar(select(func.count()).select_from(User)))
    try:
        s.add(User(name="u1")); s.flush()
    except Exception as e:
        print("dup", type(e).__name__); s.rollback()
    s.delete(s.scalars(select(User).where(User.name == "u2")).one())
    s.commit()
    print("addresses left", s.scalar(select(func.count()).select_from(Address)))
    r = s.execute(text("UPDATE users SET name = name || '!' WHERE id > :k RETURNING id, name"), {"k": 8}).all()
    print("returning", r)
    s.commit()
    print("bulk", s.execute(text("SELECT group_concat(name, ',') FROM users")).scalar())


from sqlalchemy import (MetaData, Table, Column, Integer, JSON, Enum, Boolean,
    CheckConstraint, UniqueConstraint, Index, DateTime, Numeric)
from sqlalchemy.dialects.sqlite import insert
# SQLAlchemy Core: constraints, reflection, JSON, an upsert, server defaults.
from sqlalchemy import (create_engine, MetaData, Table, Column, Integer, String, JSON, Enum, Boolean,
    CheckConstraint, UniqueConstraint, Index, text, select, inspect, func, DateTime, Numeric)
from sqlalchemy.dialects.sqlite import insert
path = sys.argv[1] + ".core.db"
if os.path.exists(path): os.remove(path)
e = create_engine(f"sqlite:///{path}")
md = MetaData()
t = Table("items", md,
    Column("id", Integer, primary_key=True),
    Column("sku", String(20), nullable=False),
    Column("attrs", JSON),
    Column("kind", Enum("a", "b", name="kind_enum", create_constraint=True)),
    Column("active", Boolean, server_default=text("1")),
    Column("price", Numeric(10, 2), server_default="0"),
    Column("ts", DateTime, server_default=func.current_timestamp()),
    CheckConstraint("length(sku) > 1", name="sku_len"),
    UniqueConstraint("sku", name="uq_sku"),
    Index("ix_kind_active", "kind", "active"))
md.create_all(e)
insp = inspect(e)
print("pk", insp.get_pk_constraint("items"))
print("uq", insp.get_unique_constraints("items"))
print("ck", insp.get_check_constraints("items"))
print("ix", insp.get_indexes("items"))
print("cols", [(c["name"], str(c["type"]), c.get("default")) for c in insp.get_columns("items")])
r = Table("items", MetaData(), autoload_with=e)
print("reflected", [c.name for c in r.columns], [str(c.type) for c in r.columns])
with e.begin() as c:
    c.execute(t.insert(), [{"sku": f"s{i}", "attrs": {"n": i, "tags": ["x", i]}, "kind": "ab"[i % 2]} for i in range(5)])
    stmt = insert(t).values(sku="s1", attrs={"n": 99}, kind="b")
    stmt = stmt.on_conflict_do_update(index_elements=["sku"], set_={"attrs": stmt.excluded.attrs})
    c.execute(stmt)
    print("json", c.execute(select(t.c.sku, t.c.attrs["n"].as_integer()).order_by(t.c.sku)).all())
    print("json path", c.execute(text("SELECT json_extract(attrs, '$.tags[1]') FROM items WHERE id = 3")).scalar())
    try:
        c.execute(t.insert().values(sku="z", kind="a"))
    except Exception as ex:
        print("check", type(ex.orig).__name__, ex.orig)
    print("defaults", c.execute(select(t.c.active, t.c.price, t.c.ts.is_not(None))).first())
    print("count", c.execute(select(func.count()).select_from(t).where(t.c.kind == "a")).scalar())
