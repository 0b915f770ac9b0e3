-- Runs once when the docker-compose Postgres volume is first created: the
-- login role leased uses, as docs/schema.md describes. Development only.
CREATE ROLE lease_service NOLOGIN;
CREATE ROLE leased_app LOGIN PASSWORD 'leased_app_dev_only' IN ROLE lease_service;
ALTER ROLE leased_app SET default_transaction_isolation = 'serializable';
-- leased-relay's login role (docs/relay.md); the migration creates lease_relay
-- and uses this one as it is.
CREATE ROLE lease_relay NOLOGIN;
CREATE ROLE leased_relay LOGIN PASSWORD 'leased_relay_dev_only' IN ROLE lease_relay;
