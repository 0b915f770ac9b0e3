-- Runs once when the docker-compose Postgres volume is first created: the
-- login role leased uses, as docs/schema.md describes. Development only.
CREATE ROLE lease_service NOLOGIN;
CREATE ROLE leased_app LOGIN PASSWORD 'leased_app_dev_only' IN ROLE lease_service;
ALTER ROLE leased_app SET default_transaction_isolation = 'serializable';
