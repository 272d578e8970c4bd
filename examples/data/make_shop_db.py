"""Generate ``examples/data/shop.db``: a small, realistic sales dataset for the data tools and the examples.

Reproducible (fixed seed, standard library only): running it twice gives the same rows. The file itself is
committed; this script is how it was made and how a test proves the committed rows are what it makes. It is
not a benchmark fixture and makes no claim of statistical realism beyond "looks like a shop".

Tables: regions, customers, products, orders (2025-01 .. 2026-06, seasonal with growth), order_items (the
price at sale), returns.

    python examples/data/make_shop_db.py            # rewrites examples/data/shop.db
    python examples/data/make_shop_db.py --out x.db
"""

from __future__ import annotations

import argparse
import calendar
import hashlib
import json
import random
import sqlite3
import sys
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path

SEED = 20250101
DEFAULT_OUT = Path(__file__).with_name("shop.db")
FIRST_MONTH = (2025, 1)
MONTHS = 18
TARGET_ORDERS = 4_000
CUSTOMERS = 300
LAST_DAY = date(2026, 6, 30)

SCHEMA = """
CREATE TABLE regions (
    region_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    manager TEXT NOT NULL
);
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    region_id INTEGER NOT NULL REFERENCES regions(region_id),
    segment TEXT NOT NULL CHECK (segment IN ('consumer', 'small_business', 'enterprise')),
    signup_date TEXT NOT NULL
);
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    unit_price REAL NOT NULL,
    unit_cost REAL NOT NULL
);
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
    order_date TEXT NOT NULL,
    channel TEXT NOT NULL CHECK (channel IN ('web', 'mobile', 'store', 'phone')),
    status TEXT NOT NULL CHECK (status IN ('delivered', 'shipped', 'processing', 'cancelled'))
);
CREATE TABLE order_items (
    order_item_id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(order_id),
    product_id INTEGER NOT NULL REFERENCES products(product_id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    unit_price REAL NOT NULL,
    discount REAL NOT NULL DEFAULT 0
);
CREATE TABLE returns (
    return_id INTEGER PRIMARY KEY,
    order_item_id INTEGER NOT NULL REFERENCES order_items(order_item_id),
    returned_on TEXT NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    reason TEXT NOT NULL
);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX orders_date ON orders(order_date);
CREATE INDEX items_order ON order_items(order_id);
CREATE INDEX items_product ON order_items(product_id);
CREATE INDEX returns_item ON returns(order_item_id);
"""

REGIONS = [
    ("North", "Ingrid Dahl"),
    ("South", "Marco Ruiz"),
    ("East", "Mei Lin"),
    ("West", "Tom Becker"),
    ("Central", "Amara Okafor"),
]
REGION_WEIGHTS = [0.16, 0.24, 0.22, 0.26, 0.12]

# (category, price range, margin range, names)
CATALOGUE = [
    ("Electronics", (39.0, 649.0), (0.18, 0.32), [
        "Wireless Earbuds", "Noise-Cancelling Headphones", "Bluetooth Speaker", "Smart Watch",
        "USB-C Dock", "Portable Charger", "4K Webcam", "E-Reader",
    ]),
    ("Home", (12.0, 189.0), (0.35, 0.55), [
        "Ceramic Mug Set", "Cast Iron Pan", "Linen Duvet Cover", "Table Lamp", "Knife Block",
        "French Press", "Bath Towel Set", "Storage Baskets",
    ]),
    ("Outdoor", (19.0, 420.0), (0.30, 0.45), [
        "Trail Backpack", "Two-Person Tent", "Sleeping Bag", "Camping Stove", "Trekking Poles",
        "Water Filter", "Headlamp", "Folding Chair",
    ]),
    ("Office", (6.0, 329.0), (0.30, 0.50), [
        "Ergonomic Chair Cushion", "Standing Desk Mat", "Notebook Pack", "Gel Pens", "Monitor Arm",
        "Desk Organizer", "Paper Shredder", "Whiteboard",
    ]),
    ("Apparel", (15.0, 229.0), (0.45, 0.62), [
        "Rain Jacket", "Merino Socks", "Fleece Pullover", "Running Shorts", "Wool Beanie",
        "Hiking Boots", "Base Layer Top", "Canvas Cap",
    ]),
]

FIRST_NAMES = [
    "Ada", "Ben", "Chloe", "Daniel", "Elif", "Farah", "Gabriel", "Hana", "Ivan", "Jonas", "Kira", "Leo",
    "Maya", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Victor", "Wen", "Yara",
    "Zoe", "Aiko", "Bruno", "Clara", "Dev", "Emma", "Felix", "Grace", "Hugo", "Isla", "Jamal", "Lena",
]
LAST_NAMES = [
    "Andersen", "Brown", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen",
    "Kowalski", "Lopez", "Müller", "Nakamura", "Olsen", "Patel", "Quist", "Rossi", "Silva", "Tanaka",
    "Usman", "Varga", "Weber", "Xu", "Yilmaz", "Zhang", "Novak", "Moreau", "Berg", "Kim",
]
BUSINESS_SUFFIXES = [
    "Logistics", "Studio", "Outfitters", "Consulting", "Supplies", "Labs", "Trading", "Works", "Partners",
    "Design", "Foods", "Clinic",
]
SEGMENTS = [("consumer", 0.62), ("small_business", 0.28), ("enterprise", 0.10)]
# Month of year → relative demand (winter holidays high, late winter low).
SEASON = {1: 0.85, 2: 0.78, 3: 0.92, 4: 0.97, 5: 1.0, 6: 0.95, 7: 0.9, 8: 0.94, 9: 1.0, 10: 1.06,
          11: 1.32, 12: 1.48}
MONTHLY_GROWTH = 1.025
CHANNELS = [("web", 0.48), ("mobile", 0.3), ("store", 0.16), ("phone", 0.06)]
RETURN_REASONS = [("damaged", 0.3), ("wrong item", 0.15), ("not as described", 0.25), ("changed mind", 0.3)]
PRICE_RISE_FROM = date(2026, 1, 1)
PRICE_RISE = {"Electronics": 1.0, "Home": 1.04, "Outdoor": 1.06, "Office": 1.03, "Apparel": 1.05}


def _pick(rng: random.Random, weighted: Sequence[tuple[str, float]]) -> str:
    return rng.choices([item for item, _ in weighted], [weight for _, weight in weighted])[0]


def _months() -> list[tuple[int, int]]:
    year, month = FIRST_MONTH
    result = []
    for _ in range(MONTHS):
        result.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return result


def _orders_per_month() -> list[int]:
    raw = [SEASON[month] * MONTHLY_GROWTH**index for index, (_, month) in enumerate(_months())]
    scale = TARGET_ORDERS / sum(raw)
    return [round(value * scale) for value in raw]


Product = tuple[int, str, str, str, float, float]
Customer = tuple[int, str, str, int, str, str]


def _products(rng: random.Random) -> list[Product]:
    rows = []
    for category, (low, high), (margin_low, margin_high), names in CATALOGUE:
        for name in names:
            product_id = len(rows) + 1
            price = round(rng.uniform(low, high), 0) - 0.01
            cost = round(price * (1 - rng.uniform(margin_low, margin_high)), 2)
            sku = f"{category[:3].upper()}-{product_id:03d}"
            rows.append((product_id, sku, name, category, price, cost))
    return rows


def _customers(rng: random.Random) -> list[Customer]:
    rows = []
    start = date(2023, 6, 1)
    span = (date(2026, 5, 31) - start).days
    for customer_id in range(1, CUSTOMERS + 1):
        segment = _pick(rng, SEGMENTS)
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        if segment == "consumer":
            name = f"{first} {last}"
        else:
            name = f"{last} {rng.choice(BUSINESS_SUFFIXES)}"
        email = f"{first.lower()}.{last.lower()}{customer_id}@example.com".replace("ü", "u")
        region_id = rng.choices(range(1, len(REGIONS) + 1), REGION_WEIGHTS)[0]
        # Sign-ups accelerate over time: an exponent below 1 skews dates towards the end of the span.
        signup = start + timedelta(days=int(span * rng.random() ** 0.7))
        rows.append((customer_id, name, email, region_id, segment, signup.isoformat()))
    return rows


Order = tuple[int, int, str, str, str]
Item = tuple[int, int, int, int, float, float]
Return = tuple[int, int, str, int, str]


def _simulate(
    rng: random.Random, products: list[Product], customers: list[Customer]
) -> tuple[list[Order], list[Item], list[Return]]:
    popularity = [rng.paretovariate(1.6) for _ in products]
    activity = {"consumer": 1.0, "small_business": 2.2, "enterprise": 4.5}
    orders: list[Order] = []
    items: list[Item] = []
    returns: list[Return] = []
    for (year, month), count in zip(_months(), _orders_per_month(), strict=True):
        days = calendar.monthrange(year, month)[1]
        for _ in range(count):
            day = date(year, month, rng.randint(1, days))
            eligible = [c for c in customers if c[5] <= day.isoformat()]
            customer = rng.choices(eligible, [activity[c[4]] for c in eligible])[0]
            order_id = len(orders) + 1
            age = (LAST_DAY - day).days
            if rng.random() < 0.04:
                status = "cancelled"
            else:
                status = "processing" if age < 3 else "shipped" if age < 10 else "delivered"
            orders.append((order_id, customer[0], day.isoformat(), _pick(rng, CHANNELS), status))
            lines = rng.choices([1, 2, 3, 4, 5], [45, 28, 15, 8, 4])[0]
            for product in rng.choices(products, popularity, k=lines):
                item = _item(rng, len(items) + 1, order_id, product, customer[4], day)
                items.append(item)
                returned = day + timedelta(days=rng.randint(4, 30))
                if status == "delivered" and rng.random() < 0.045 and returned <= LAST_DAY:
                    quantity, reason = rng.randint(1, item[3]), _pick(rng, RETURN_REASONS)
                    returns.append((len(returns) + 1, item[0], returned.isoformat(), quantity, reason))
    return orders, items, returns


def _item(rng: random.Random, item_id: int, order_id: int, product: Product, segment: str, day: date) -> Item:
    quantity = rng.randint(1, 12 if segment == "enterprise" else 3)
    rise = PRICE_RISE[product[3]] if day >= PRICE_RISE_FROM else 1.0
    if segment == "enterprise":
        discount = 0.1
    else:
        discount = 0.15 if day.month == 11 and rng.random() < 0.5 else 0.0
    return (item_id, order_id, product[0], quantity, round(product[4] * rise, 2), discount)


def build(path: Path, seed: int = SEED) -> None:
    """Write the dataset to ``path`` (replacing it) from ``seed``."""
    rng = random.Random(seed)
    products = _products(rng)
    customers = _customers(rng)
    orders, items, returns = _simulate(rng, products, customers)
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        db.executemany("INSERT INTO regions VALUES (?, ?, ?)",
                       [(index + 1, name, manager) for index, (name, manager) in enumerate(REGIONS)])
        db.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?)", customers)
        db.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?)", products)
        db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", orders)
        db.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?, ?, ?)", items)
        db.executemany("INSERT INTO returns VALUES (?, ?, ?, ?, ?)", returns)
    db.close()
    with sqlite3.connect(path) as db:
        db.execute("VACUUM")
    db.close()


def content_digest(path: Path) -> str:
    """The sha256 of every table's name, columns and rows (in primary-key order): equal data, equal digest."""
    digest = hashlib.sha256()
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        tables = [row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )]
        for table in tables:
            cursor = db.execute(f'SELECT * FROM "{table}" ORDER BY 1')
            columns = [column[0] for column in cursor.description]
            digest.update(json.dumps([table, columns], ensure_ascii=False).encode())
            for row in cursor:
                digest.update(json.dumps(row, ensure_ascii=False).encode())
    db.close()
    return digest.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build the dataset and print its row counts and content digest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    build(args.out, args.seed)
    with sqlite3.connect(args.out) as db:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            print(f"{table}: {db.execute(f'SELECT count(*) FROM {table}').fetchone()[0]} rows")
    db.close()
    print(f"{args.out}: {args.out.stat().st_size:,} bytes, content sha256 {content_digest(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
