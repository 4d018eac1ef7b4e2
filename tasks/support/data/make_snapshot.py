"""Write `prod-snapshot.sqlite`: a deterministic stand-in for a snapshot of production data
(customers and orders as a support desk's database would hold them), used by tasks that start
from `start.state_db`. Run from the repository: python tasks/support/data/make_snapshot.py"""

from __future__ import annotations

import random
import sys
from datetime import date, timedelta
from pathlib import Path

from harness.sim.env import write_snapshot

TODAY = date(2026, 11, 20)
FIRST = [
    "Barbara",
    "Claude",
    "Donald",
    "Edsger",
    "Frances",
    "John",
    "Katherine",
    "Leslie",
    "Margaret",
    "Niklaus",
    "Radia",
    "Tim",
]
LAST = [
    "Liskov",
    "Shannon",
    "Knuth",
    "Dijkstra",
    "Allen",
    "Backus",
    "Johnson",
    "Lamport",
    "Hamilton",
    "Wirth",
    "Perlman",
    "Berners-Lee",
]
PRODUCTS = [
    ("DK-1", "Standing desk", 349.0),
    ("LM-2", "Desk lamp", 39.9),
    ("CH-7", "Office chair", 219.0),
    ("MS-9", "Wireless mouse", 24.5),
    ("HB-4", "USB hub", 29.0),
    ("WC-3", "Webcam", 64.0),
]
CITIES = [("Cambridge", "CB2 1TN", "GB"), ("Boston", "02139", "US"), ("Zurich", "8092", "CH")]


def snapshot(seed: int = 2026) -> dict:
    rng = random.Random(seed)
    customers, orders = {}, {}
    for i, (first, last) in enumerate(zip(FIRST, LAST, strict=True)):
        city, zip_code, country = CITIES[i % len(CITIES)]
        address = {
            "street": f"{rng.randint(1, 99)} {last} Lane",
            "city": city,
            "zip": zip_code,
            "country": country,
        }
        customer_id = f"C-{200 + i}"
        customers[customer_id] = {
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@example.org",
            "tier": "gold" if i % 4 == 0 else "standard",
            "address": address,
        }
        for _ in range(2 + i % 2):
            number = 2040 + len(orders)
            sku, name, price = rng.choice(PRODUCTS)
            placed = TODAY - timedelta(days=rng.randint(1, 70))
            status = rng.choice(["processing", "shipped", "delivered", "delivered"])
            order = {
                "customer_id": customer_id,
                "items": [{"sku": sku, "name": name, "price": price, "qty": rng.randint(1, 2)}],
                "status": status,
                "placed_at": placed.isoformat(),
                "shipping_address": address,
            }
            if status != "processing":
                order["tracking"] = f"1Z999BB1{number:010d}"
            if status == "delivered":
                order["delivered_at"] = min(placed + timedelta(days=4), TODAY).isoformat()
            orders[f"O-{number}"] = order
    return {
        "today": TODAY.isoformat(),
        "refund_window_days": 30,
        "customers": customers,
        "orders": orders,
        "refunds": [],
        "handoffs": [],
    }


if __name__ == "__main__":
    target = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("prod-snapshot.sqlite")
    )
    target.unlink(missing_ok=True)
    write_snapshot(snapshot(), target)
    print(f"wrote {target}")
