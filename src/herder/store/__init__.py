"""Everything durable: schema, migrations and the repositories over SQLite and PostgreSQL."""
