-- Key/value facts about this database (for example, that the quickstart grant was made).
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
